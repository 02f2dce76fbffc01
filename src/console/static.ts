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
 *  - such a page with `?env=test` or `?env=live` (an alert's link to a test-mode watch, issue 32)
 *                        → 303 to the same path without the query, setting the environment switch
 *                          (cookie `tw_env`, as the page's switch writes it), so the page opens in
 *                          the environment of the object it shows instead of a 404
 *  - /console/docs/      → the API reference, plain HTML written from the OpenAPI document, and
 *                          Swagger UI over /docs/openapi.json loaded on request; its files under
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
import { ENV_COOKIE } from './guard.js';

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

/**
 * The API reference page (issue 19 item 7: Swagger UI's 1.7 MB bundle took 5.5–9.2 s to become
 * usable on a loaded machine). The reference is written here, as plain HTML, from the same
 * OpenAPI document /docs/openapi.json serves (renderReference): readable at first paint. Swagger
 * UI, for trying requests, is loaded only when asked for ("Open the interactive explorer").
 */
function docsHtml(reference: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference · tronwatch</title>
<link rel="icon" type="image/png" href="/console/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="/console/docs/assets/docs.css">
</head>
<body>
<header class="tw-docs-bar">
  <a href="/console/">&larr; Back to the console</a>
  <span>tronwatch API reference &middot; <a href="/docs/openapi.json">openapi.json</a></span>
</header>
<main aria-label="API reference">
<div class="tw-explorer-bar">
  <button type="button" id="open-explorer">Open the interactive explorer</button>
  <span>Swagger UI, to try requests with your key (loads about 1.7 MB).</span>
</div>
<div id="reference">${reference}</div>
<div id="swagger-ui"></div>
</main>
<script src="/console/docs/assets/docs-init.js"></script>
</body>
</html>
`;
}

/** HTML text of `s` (element content and double-quoted attribute values). */
function esc(s: unknown): string {
  return String(s ?? '')
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}

/** Description text (CommonMark in the document) as HTML: escaped, `code spans` kept as code. */
function prose(s: unknown): string {
  return esc(s).replace(/`([^`]+)`/g, '<code>$1</code>');
}

type Json = Record<string, unknown>;
const obj = (x: unknown): Json => (typeof x === 'object' && x !== null ? (x as Json) : {});

/** A schema in a few words: its $ref's name, its type, enum or format. */
function schemaWords(schema: unknown): string {
  const s = obj(schema);
  if (typeof s.$ref === 'string') return s.$ref.split('/').pop() ?? '';
  if (Array.isArray(s.enum)) return s.enum.map(String).join(' | ');
  if (Array.isArray(s.anyOf)) return s.anyOf.map(schemaWords).join(' or ');
  if (s.type === 'array') return `${schemaWords(s.items)}[]`;
  return [s.type, s.format].filter((x) => typeof x === 'string').join(', ');
}

/**
 * The OpenAPI document as a plain reference: each operation (method, path, summary, description,
 * parameters, request body, responses), then each component schema with its members.
 */
export function renderReference(doc: unknown): string {
  const d = obj(doc);
  const info = obj(d.info);
  let html = `<h1>${esc(info.title)} <small>${esc(info.version)}</small></h1>`;
  html += `<p class="tw-pre">${prose(info.description)}</p><h2>Operations</h2>`;
  for (const [path, item] of Object.entries(obj(d.paths))) {
    for (const [method, opRaw] of Object.entries(obj(item))) {
      const op = obj(opRaw);
      const id = `op-${method}-${path.replace(/[^A-Za-z0-9]+/g, '-')}`;
      html += `<section class="tw-op" id="${esc(id)}"><h3><span class="tw-method tw-${esc(method)}">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code></h3>`;
      if (op.summary) html += `<p><strong>${esc(op.summary)}</strong></p>`;
      if (op.description) html += `<p class="tw-pre">${prose(op.description)}</p>`;
      const params = Array.isArray(op.parameters) ? op.parameters.map(obj) : [];
      if (params.length > 0) {
        html += '<h4>Parameters</h4><ul>';
        for (const p of params) {
          html += `<li><code>${esc(p.name)}</code> <span class="tw-muted">(${esc(p.in)}${p.required ? ', required' : ''}${schemaWords(p.schema) ? `, ${esc(schemaWords(p.schema))}` : ''})</span> ${prose(p.description)}</li>`;
        }
        html += '</ul>';
      }
      const body = obj(obj(obj(op.requestBody).content)['application/json']).schema;
      if (body !== undefined)
        html += `<h4>Request body</h4><p><code>${esc(schemaWords(body))}</code></p>`;
      html += '<h4>Responses</h4><ul>';
      for (const [status, r] of Object.entries(obj(op.responses))) {
        const schema = obj(obj(obj(r).content)['application/json']).schema;
        html += `<li><code>${esc(status)}</code> ${prose(obj(r).description)}${schema !== undefined ? ` <span class="tw-muted">(${esc(schemaWords(schema))})</span>` : ''}</li>`;
      }
      html += '</ul></section>';
    }
  }
  html += '<h2>Schemas</h2>';
  for (const [name, sRaw] of Object.entries(obj(obj(d.components).schemas))) {
    const s = obj(sRaw);
    const required = new Set(Array.isArray(s.required) ? s.required.map(String) : []);
    html += `<section class="tw-op" id="schema-${esc(name)}"><h3><code>${esc(name)}</code></h3>`;
    if (s.description) html += `<p class="tw-pre">${prose(s.description)}</p>`;
    const props = Object.entries(obj(s.properties));
    if (props.length > 0) {
      html += '<ul>';
      for (const [k, v] of props) {
        html += `<li><code>${esc(k)}</code> <span class="tw-muted">(${esc(schemaWords(v))}${required.has(k) ? ', required' : ''})</span> ${prose(obj(v).description)}</li>`;
      }
      html += '</ul>';
    }
    html += '</section>';
  }
  return html;
}

/** Swagger UI, loaded when the button is pressed (and at once for a #/ deep link of its own). */
const DOCS_INIT_JS = `(function () {
  var button = document.getElementById('open-explorer');
  function load(src) {
    return new Promise(function (ok, fail) {
      var s = document.createElement('script');
      s.src = src; s.onload = ok; s.onerror = fail;
      document.body.appendChild(s);
    });
  }
  function open() {
    button.disabled = true;
    button.textContent = 'Loading the explorer…';
    var css = document.createElement('link');
    css.rel = 'stylesheet'; css.href = '/console/docs/assets/swagger-ui.css';
    document.head.appendChild(css);
    load('/console/docs/assets/swagger-ui-bundle.js').then(function () {
      window.ui = SwaggerUIBundle({
        url: '/docs/openapi.json',
        dom_id: '#swagger-ui',
        deepLinking: true,
        presets: [SwaggerUIBundle.presets.apis],
        layout: 'BaseLayout',
        defaultModelsExpandDepth: 0,
        tryItOutEnabled: false,
      });
      document.getElementById('reference').hidden = true;
      button.parentNode.hidden = true;
    }, function () {
      button.disabled = false;
      button.textContent = 'Could not load the explorer: try again';
    });
  }
  button.addEventListener('click', open);
  if (location.hash.indexOf('#/') === 0) open();
})();
`;

const DOCS_CSS = `body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: #0f172a; line-height: 1.5; }
.tw-docs-bar { display: flex; flex-wrap: wrap; gap: 8px 24px; justify-content: space-between;
  align-items: center; padding: 12px 20px; background: #0f172a; color: #e2e8f0; font-size: 14px; }
.tw-docs-bar a { color: #93c5fd; }
.tw-docs-bar a:focus-visible { outline: 2px solid #93c5fd; outline-offset: 2px; }
h1 { font-size: 1.6rem; line-height: 1.25; } h2 { font-size: 1.3rem; }
main { max-width: 980px; margin: 0 auto; padding: 8px 20px 40px; overflow-wrap: anywhere; }
#swagger-ui { max-width: none; }
.tw-explorer-bar { display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: center; margin: 14px 0;
  font-size: 14px; color: #475569; }
.tw-explorer-bar button { font: inherit; font-weight: 600; padding: 7px 14px; border-radius: 6px;
  border: 1px solid #4f46e5; background: #4f46e5; color: #fff; cursor: pointer; }
.tw-pre { white-space: pre-line; }
.tw-op { border-top: 1px solid #e2e8f0; padding: 6px 0 2px; }
.tw-op h3 { font-size: 1.05rem; margin: 10px 0 4px; }
.tw-op h4 { font-size: 0.9rem; margin: 10px 0 2px; color: #334155; }
.tw-op ul { margin: 0; padding-left: 20px; }
.tw-method { display: inline-block; min-width: 58px; text-align: center; border-radius: 4px;
  font-size: 12px; padding: 2px 6px; color: #fff; background: #475569; }
.tw-get { background: #2563eb; } .tw-post { background: #16a34a; } .tw-delete { background: #dc2626; }
.tw-patch, .tw-put { background: #d97706; }
.tw-muted { color: #64748b; font-size: 0.9em; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.92em; }
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

    // The reference is the same for the process's life: written once, at the first request.
    let docsPage: string | undefined;
    scope.get('/console/docs/', (_request, reply) => {
      if (docsPage === undefined) {
        const swagger = (app as unknown as { swagger?: () => unknown }).swagger;
        docsPage = docsHtml(
          typeof swagger === 'function' ? renderReference(swagger.call(app)) : '',
        );
      }
      return securityHeaders(reply)
        .header('Cache-Control', 'no-cache')
        .type('text/html; charset=utf-8')
        .send(docsPage);
    });
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

    scope.get<{ Params: { '*': string }; Querystring: { env?: unknown } }>(
      '/console/*',
      async (request, reply) => {
        // The wildcard as decoded by the router, query string excluded.
        const path = request.params['*'];
        // The console API's unknown GETs keep their JSON 404, never the app's HTML.
        if (path === 'api' || path.startsWith('api/')) {
          return reply.code(404).send({ error: 'not found' });
        }
        const env = request.query.env;
        if (env === 'test' || env === 'live') {
          // The switch's cookie exactly as the page writes it (web/src/app.tsx EnvironmentSwitch);
          // only these two values, and the redirect stays on this path (no open redirect).
          return reply
            .header(
              'Set-Cookie',
              `${ENV_COOKIE}=${env}; Path=/console; SameSite=Lax; Max-Age=31536000`,
            )
            .header('Cache-Control', 'no-store')
            .redirect(`/console/${path.split('/').map(encodeURIComponent).join('/')}`, 303);
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
      },
    );
  });
}
