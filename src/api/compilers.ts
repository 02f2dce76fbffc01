/**
 * Fastify's schema compilers (Ajv for requests, fast-json-stringify for responses), shared by
 * every app this process builds: a route whose schemas were compiled once is not compiled again.
 *
 * A service builds its app once, so this changes nothing there; tests build hundreds (one per
 * test), and compiling every route's validators and serializers was most of the CPU they spent
 * outside the database (a profile of api-watches: 20 s of 49 s in fast-json-stringify alone).
 *
 * Shape: the `compilersFactory` option of `Fastify({ schemaController })`. Each factory call
 * (one per encapsulation context) keys its compiled functions by the JSON of the shared schemas
 * and options it was given plus the JSON of the route's schema, part and status (by a
 * SHA-256 digest: the shared schemas run to hundreds of KB, too long for a Map key), so two
 * different schemas never share a function. The functions are pure (Ajv's `errors` is read
 * synchronously after each call), so sharing them across apps is safe. Memory: one entry per
 * distinct route schema in the code, bounded.
 */
import { createHash } from 'node:crypto';
import AjvCompiler, { type BuildCompilerFromPool } from '@fastify/ajv-compiler';
import { type SerializerFactory, SerializerSelector } from '@fastify/fast-json-stringify-compiler';

/** Ajv instances pooled by shared schemas and options (the library's own pool), process-wide. */
const ajvFactory = AjvCompiler();
const serializerFactory = SerializerSelector();
/** Compiled functions by digest of (context, route); route compilers by digest of the context. */
const compiled = new Map<string, unknown>();
const contexts = new Map<string, (route: RouteDef) => unknown>();

/** What Fastify passes a compiler for one part (or one status) of one route. */
interface RouteDef {
  schema?: unknown;
  method: string;
  url: string;
  httpPart?: string;
  httpStatus?: string;
}

/** A short digest of what a compiled function depends on (the shared schemas run to 100s of KB). */
function digest(...parts: unknown[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(JSON.stringify(p) ?? 'undefined').update('\0');
  return h.digest('base64');
}

/**
 * The shared schemas as [id, digest] pairs. Fastify hands every encapsulation context (about 110
 * per app) the same schema objects, so each object's digest is computed once (a WeakMap) instead
 * of stringifying all 70 KB of them 110 times. This relies on a schema not being changed once
 * added (`addSchema`), which Fastify and this codebase never do.
 */
const schemaDigests = new WeakMap<object, string>();

function sharedSchemaDigests(externalSchemas: unknown): Array<[string, string]> {
  if (externalSchemas === null || typeof externalSchemas !== 'object') {
    return [['', digest(externalSchemas)]];
  }
  return Object.entries(externalSchemas).map(([id, schema]): [string, string] => {
    if (schema === null || typeof schema !== 'object') return [id, digest(schema)];
    let d = schemaDigests.get(schema);
    if (d === undefined) {
      d = digest(schema);
      schemaDigests.set(schema, d);
    }
    return [id, d];
  });
}

/**
 * One route compiler per distinct (shared schemas, options): memoises each route's function by
 * the digest of its schema, part or status, method and URL.
 */
function routeCompiler(
  kind: string,
  externalSchemas: unknown,
  options: unknown,
  make: () => (route: RouteDef) => unknown,
): (route: RouteDef) => unknown {
  const context = digest(kind, options, sharedSchemaDigests(externalSchemas));
  const known = contexts.get(context);
  if (known) return known;
  const compile = make();
  const compiler = (route: RouteDef) => {
    const key = `${context}${digest(route.method, route.url, route.httpPart ?? route.httpStatus ?? '', route.schema)}`;
    const hit = compiled.get(key);
    if (hit !== undefined) return hit;
    const made = compile(route);
    compiled.set(key, made);
    return made;
  };
  contexts.set(context, compiler);
  return compiler;
}

/** The compilers factory to pass as `Fastify({ schemaController: { compilersFactory } })`. */
export const sharedCompilers: {
  buildValidator: BuildCompilerFromPool;
  buildSerializer: SerializerFactory;
} = {
  buildValidator(externalSchemas, options) {
    // The library's declared types say a schema; at run time Fastify passes its route definition.
    return routeCompiler(
      'validator',
      externalSchemas,
      options,
      () => ajvFactory(externalSchemas, options) as unknown as (route: RouteDef) => unknown,
    ) as unknown as ReturnType<BuildCompilerFromPool>;
  },
  buildSerializer(externalSchemas, options) {
    return routeCompiler('serializer', externalSchemas, options, () => {
      const compile = serializerFactory(externalSchemas, options);
      return (route) => compile(route as Parameters<typeof compile>[0]);
    }) as ReturnType<SerializerFactory>;
  },
};
