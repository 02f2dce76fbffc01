/**
 * The console app's build: web/ → dist/web/ (served at /console/ by src/console/static.ts).
 * Preact through esbuild's automatic JSX runtime (no Babel). Hashed file names under assets/,
 * so the server caches them for a year and index.html not at all.
 *
 * `npx vite --config web/vite.config.ts` serves the app with hot reload and proxies the API to a
 * running tronwatch (TRONWATCH_URL, default http://127.0.0.1:8088).
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const target = process.env.TRONWATCH_URL ?? 'http://127.0.0.1:8088';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/console/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: fileURLToPath(new URL('../dist/web/', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // No inline <script>: the page's Content-Security-Policy allows only 'self' scripts.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    reportCompressedSize: false,
  },
  server: {
    proxy: { '/console/api': target, '/docs': target, '/console/docs': target },
  },
});
