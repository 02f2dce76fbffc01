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
 * and options it was given plus the JSON of the route's schema, part and status, so two
 * different schemas never share a function. The functions are pure (Ajv's `errors` is read
 * synchronously after each call), so sharing them across apps is safe. Memory: one entry per
 * distinct route schema in the code, bounded.
 */
import AjvCompiler, { type BuildCompilerFromPool } from '@fastify/ajv-compiler';
import { type SerializerFactory, SerializerSelector } from '@fastify/fast-json-stringify-compiler';

/** Ajv instances pooled by shared schemas and options (the library's own pool), process-wide. */
const ajvFactory = AjvCompiler();
const serializerFactory = SerializerSelector();
const compiled = new Map<string, unknown>();

/** What Fastify passes a validator compiler for one part of one route. */
interface RouteDef {
  schema: unknown;
  method: string;
  url: string;
  httpPart?: string;
}

function memo<T>(key: string, make: () => T): T {
  const hit = compiled.get(key);
  if (hit !== undefined) return hit as T;
  const made = make();
  compiled.set(key, made);
  return made;
}

/** The compilers factory to pass as `Fastify({ schemaController: { compilersFactory } })`. */
export const sharedCompilers: {
  buildValidator: BuildCompilerFromPool;
  buildSerializer: SerializerFactory;
} = {
  buildValidator(externalSchemas, options) {
    // The library's declared types say a schema; at run time Fastify passes its route definition.
    const compile = ajvFactory(externalSchemas, options) as unknown as (route: RouteDef) => unknown;
    const context = `v${JSON.stringify(externalSchemas)}${JSON.stringify(options)}`;
    const validatorCompiler = (route: RouteDef) =>
      memo(
        `${context}|${route.method} ${route.url} ${route.httpPart ?? ''}|${JSON.stringify(route.schema)}`,
        () => compile(route),
      );
    return validatorCompiler as unknown as ReturnType<BuildCompilerFromPool>;
  },
  buildSerializer(externalSchemas, options) {
    const compile = serializerFactory(externalSchemas, options);
    const context = `s${JSON.stringify(externalSchemas)}${JSON.stringify(options)}`;
    return (route) =>
      memo(
        `${context}|${route.method} ${route.url} ${String(route.httpStatus)}|${JSON.stringify(route.schema)}`,
        () => compile(route),
      );
  },
};
