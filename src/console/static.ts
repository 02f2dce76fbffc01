/**
 * The console's web app (web/, built by `npm run build:web` into dist/web/) served at /console/,
 * and an OpenAPI viewer at /console/docs/ (Swagger UI from the npm package swagger-ui-dist,
 * served from node_modules: no CDN, nothing fetched at run time).
 *
 * What answers what (GET only):
 *  - /console            → 308 to /console/
 *  - /console/assets/…   → the hashed bundle files: `Cache-Control: public, max-age=31536000,
 *                          immutable` (a new build gives new names)
 *  - /console/<file>     → another file of the build (favicon): cached 1 hour
 *  - /console/api/…      → never the app: a GET the console API does not route gets its 404 body
 *  - anything else under /console/ → index.html with `Cache-Control: no-cache` (the app routes on
 *                          the client: /console/events/evt_…, /console/invite#token=…)
 *  - /console/docs/      → the Swagger UI page over /docs/openapi.json; its files under
 *                          /console/docs/assets/ (cached 1 day: their names are not hashed)
 * With no build (dist/web/index.html missing) the app's paths answer 503
 * `{"error":"console not built: run npm run build:web"}`; the docs page works without it.
 *
 * Everything is registered in its own encapsulated plugin, so @fastify/static's `sendFile`
 * decoration never collides with another registration.
 */
import { stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** Where `npm run build:web` writes (vite's outDir): dist/web/ beside src/ and dist/. */
export const DEFAULT_CONSOLE_ROOT = fileURLToPath(new URL('../../dist/web/', import.meta.url));

const NOT_BUILT = { error: 'console not built: run npm run build:web' } as const;

/** A year: the maximum `max-age` caches honour (RFC 9111 §5.2.2.1 advises no more). */
const IMMUTABLE = 'public, max-age=31536000, immutable';
/** Unhashed files of the build (favicon): an hour. */
const SHORT = 'public, max-age=3600';
/** Swagger UI's files change only with the package version: a day. */
const DOCS_ASSETS = 'public, max-age=86400';

/**
 * The console's pages may load only their own files. Inline styles are allowed because Swagger UI
 * sets style attributes; inline scripts are not (the docs page's init script is a file).
 * frame-ancestors 'none': the console is never framed (clickjacking of Revoke, Redeliver…).
 */
const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** The files of swagger-ui-dist the docs page uses; nothing else of the package is served. */
const DOCS_FILES = new Set([
  'swagger-ui.css',
  'swagger-ui-bundle.js',
  'swagger-ui-standalone-preset.js',
  'favicon-32x32.png',
  'favicon-16x16.png',
]);

const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference · tronwatch</title>
<link rel="icon" type="image/png" href="/console/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="/console/docs/assets/swagger-ui.css">
<link rel="stylesheet" href="/console/docs/assets/docs.css">
</head>
<body>
<header class="tw-docs-bar">
  <a href="/console/">&larr; Back to the console</a>
  <span>tronwatch API reference &middot; <a href="/docs/openapi.json">openapi.json</a></span>
</header>
<main id="swagger-ui" aria-label="API reference"></main>
<script src="/console/docs/assets/swagger-ui-bundle.js"></script>
<script src="/console/docs/assets/swagger-ui-standalone-preset.js"></script>
<script src="/console/docs/assets/docs-init.js"></script>
</body>
</html>
`;

const DOCS_INIT_JS = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '/docs/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
    defaultModelsExpandDepth: 0,
    tryItOutEnabled: false,
  });
});
`;

const DOCS_CSS = `body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
.tw-docs-bar { display: flex; flex-wrap: wrap; gap: 8px 24px; justify-content: space-between;
  align-items: center; padding: 12px 20px; background: #0f172a; color: #e2e8f0; font-size: 14px; }
.tw-docs-bar a { color: #93c5fd; }
.tw-docs-bar a:focus-visible { outline: 2px solid #93c5fd; outline-offset: 2px; }
`;

function swaggerUiDir(): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve('swagger-ui-dist/package.json'));
}

function securityHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .header('Content-Security-Policy', CSP)
    .header('X-Content-Type-Options', 'nosniff')
    .header('X-Frame-Options', 'DENY')
    .header('Referrer-Policy', 'same-origin');
}

/** True when `path` is a regular file. */
async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/**
 * Serve the built console app at /console/ and the API reference at /console/docs/.
 * `root`: the build folder (default dist/web/ of this repository). Call once per app.
 */
export async function registerConsoleApp(
  app: FastifyInstance,
  opts: { root?: string } = {},
): Promise<void> {
  const root = resolve(opts.root ?? DEFAULT_CONSOLE_ROOT);
  const docsDir = swaggerUiDir();

  await app.register(async (scope) => {
    // serve: false: only reply.sendFile, routed below, so the SPA fallback decides per path.
    await scope.register(fastifyStatic, { root, serve: false });

    scope.get('/console', (_request, reply) => reply.redirect('/console/', 308));
    scope.get('/console/docs', (_request, reply) => reply.redirect('/console/docs/', 308));

    scope.get('/console/docs/', (_request, reply) =>
      securityHeaders(reply)
        .header('Cache-Control', 'no-cache')
        .type('text/html; charset=utf-8')
        .send(DOCS_HTML),
    );
    scope.get('/console/docs/assets/docs-init.js', (_request, reply) =>
      reply
        .header('Cache-Control', 'no-cache')
        .type('text/javascript; charset=utf-8')
        .send(DOCS_INIT_JS),
    );
    scope.get('/console/docs/assets/docs.css', (_request, reply) =>
      reply.header('Cache-Control', 'no-cache').type('text/css; charset=utf-8').send(DOCS_CSS),
    );
    scope.get<{ Params: { file: string } }>('/console/docs/assets/:file', (request, reply) => {
      const file = request.params.file;
      if (!DOCS_FILES.has(file)) return reply.code(404).send({ error: 'not found' });
      return reply.header('Cache-Control', DOCS_ASSETS).sendFile(file, docsDir, {
        cacheControl: false,
      });
    });

    scope.get<{ Params: { '*': string } }>('/console/*', async (request, reply) => {
      // The wildcard as decoded by the router, query string excluded.
      const path = request.params['*'];
      // The console API's unknown GETs keep their JSON 404, never the app's HTML.
      if (path === 'api' || path.startsWith('api/')) {
        return reply.code(404).send({ error: 'not found' });
      }
      if (!(await isFile(join(root, 'index.html')))) return reply.code(503).send(NOT_BUILT);

      if (path !== '' && !path.endsWith('/')) {
        const full = resolve(root, path);
        if (full.startsWith(root + sep) && (await isFile(full))) {
          const hashed = path.startsWith('assets/');
          return reply
            .header('Cache-Control', hashed ? IMMUTABLE : SHORT)
            .header('X-Content-Type-Options', 'nosniff')
            .sendFile(path, root, { cacheControl: false });
        }
        // A missing hashed asset is a stale page asking for an old build: 404, not the HTML.
        if (path.startsWith('assets/')) return reply.code(404).send({ error: 'not found' });
      }
      return securityHeaders(reply)
        .header('Cache-Control', 'no-cache')
        .sendFile('index.html', root, { cacheControl: false });
    });
  });
}
