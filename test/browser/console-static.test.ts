/**
 * How src/console/static.ts serves the built app (no browser needed): the client-side routes get
 * index.html uncached, hashed assets a year, the console API's unknown paths keep their JSON 404,
 * a missing build is a clear 503, and the API reference page loads only local files.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerConsoleApp } from '../../src/console/static.js';

let root: string;
let app: FastifyInstance;
let missing: FastifyInstance;

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-console-static-'));
  fs.mkdirSync(path.join(root, 'assets'));
  fs.writeFileSync(path.join(root, 'index.html'), '<!doctype html><title>app</title>');
  fs.writeFileSync(path.join(root, 'assets', 'index-abc123.js'), 'console.log(1)');
  fs.writeFileSync(path.join(root, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  app = Fastify();
  await registerConsoleApp(app, { root });
  missing = Fastify();
  await registerConsoleApp(missing, { root: path.join(root, 'nope') });
});

afterAll(async () => {
  await app?.close();
  await missing?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('registerConsoleApp', () => {
  it.each(['/console/', '/console/events', '/console/events/evt_1?x=1', '/console/invite'])(
    'answers the client route %s with index.html, not cached',
    async (url) => {
      const res = await app.inject({ url });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      expect(res.headers['cache-control']).toBe('no-cache');
      expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(res.body).toContain('<title>app</title>');
    },
  );

  it('opens a page in the environment its link names (?env=test from a test-mode alert)', async () => {
    for (const env of ['test', 'live']) {
      const res = await app.inject({ url: `/console/watches/wch_1?env=${env}` });
      expect(res.statusCode).toBe(303);
      expect(res.headers.location).toBe('/console/watches/wch_1');
      expect(res.headers['set-cookie']).toBe(
        `tw_env=${env}; Path=/console; SameSite=Lax; Max-Age=31536000`,
      );
    }
    // Any other value is no switch: the page, no cookie.
    const other = await app.inject({ url: '/console/watches/wch_1?env=mainnet' });
    expect(other.statusCode).toBe(200);
    expect(other.headers['set-cookie']).toBeUndefined();
  });

  it('redirects /console to /console/', async () => {
    const res = await app.inject({ url: '/console' });
    expect(res.statusCode).toBe(308);
    expect(res.headers.location).toBe('/console/');
  });

  it('caches hashed assets for a year and other files for an hour', async () => {
    const js = await app.inject({ url: '/console/assets/index-abc123.js' });
    expect(js.statusCode).toBe(200);
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(js.body).toBe('console.log(1)');
    const icon = await app.inject({ url: '/console/favicon.svg' });
    expect(icon.headers['cache-control']).toBe('public, max-age=3600');
  });

  it('answers a missing asset and unknown console API paths with JSON 404', async () => {
    for (const url of ['/console/assets/index-old.js', '/console/api/nope', '/console/api']) {
      const res = await app.inject({ url });
      expect(res.statusCode, url).toBe(404);
      expect(res.json(), url).toEqual({ error: 'not found' });
    }
  });

  it('never serves a file outside the build folder', async () => {
    for (const url of ['/console/..%2f..%2fetc%2fpasswd', '/console/%2e%2e/%2e%2e/etc/passwd']) {
      const res = await app.inject({ url });
      expect(res.body, url).not.toContain('root:');
    }
  });

  it('says how to build when the folder is missing, and still serves the docs', async () => {
    const res = await missing.inject({ url: '/console/watches' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ error: 'console not built: run npm run build:web' });
    const docs = await missing.inject({ url: '/console/docs/' });
    expect(docs.statusCode).toBe(200);
    // The reference is plain HTML; Swagger UI is loaded by the init script when asked for.
    expect(docs.body).toContain('/console/docs/assets/docs-init.js');
    expect(docs.body).toContain('Open the interactive explorer');
  });

  it('serves Swagger UI from the npm package and nothing else of it', async () => {
    const page = await app.inject({ url: '/console/docs/' });
    expect(page.statusCode).toBe(200);
    expect(page.body).not.toMatch(/https?:\/\//); // no CDN: every file is local
    const bundle = await app.inject({ url: '/console/docs/assets/swagger-ui-bundle.js' });
    expect(bundle.statusCode).toBe(200);
    expect(bundle.headers['content-type']).toMatch(/javascript/);
    const init = await app.inject({ url: '/console/docs/assets/docs-init.js' });
    expect(init.body).toContain("url: '/docs/openapi.json'");
    expect(init.body).toContain('/console/docs/assets/swagger-ui-bundle.js');
    const other = await app.inject({ url: '/console/docs/assets/package.json' });
    expect(other.statusCode).toBe(404);
  });
});
