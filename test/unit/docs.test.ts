/**
 * The repository's documents stand on their own: every relative link in README.md and docs/*.md
 * leads to a file that exists (and an anchor, in the page or in another one, to a heading that
 * exists), README.md stays a landing page (the two commands first, at most 250 lines, a link to
 * every page of docs/), and docs/api.md lists exactly the endpoints and error codes of the OpenAPI
 * document the app serves.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiHarness, apiHarness, openapiDocument } from '../helpers/api.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const DOCS = [
  'README.md',
  ...fs
    .readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
  'test/fixtures/tron-mainnet/README.md',
  'clients/typescript/README.md',
  'checkpoints/README.md',
].filter((f) => fs.existsSync(path.join(ROOT, f)));

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*]/g, '')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(markdown: string): Set<string> {
  const out = new Set<string>();
  const counts = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    if (fenced) continue;
    const m = /^#{1,6}\s+(.*)$/.exec(line);
    if (!m?.[1]) continue;
    const s = slug(m[1]);
    const n = counts.get(s) ?? 0;
    counts.set(s, n + 1);
    out.add(n === 0 ? s : `${s}-${n}`);
  }
  return out;
}

/** Markdown links outside code: [text](target), targets without a scheme. */
function relativeLinks(markdown: string): string[] {
  const text = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  const out: string[] = [];
  for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1] as string;
    if (!/^[a-z][a-z0-9+.-]*:/i.test(target)) out.push(target);
  }
  return out;
}

describe('the documents', () => {
  it('link only to files and headings that exist', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const doc of DOCS) {
      const text = fs.readFileSync(path.join(ROOT, doc), 'utf8');
      for (const link of relativeLinks(text)) {
        checked++;
        const [file = '', anchor] = link.split('#');
        const target =
          file === '' ? path.join(ROOT, doc) : path.resolve(ROOT, path.dirname(doc), file);
        if (!fs.existsSync(target)) {
          broken.push(`${doc}: ${link} (no such file)`);
          continue;
        }
        if (anchor && target.endsWith('.md')) {
          if (!anchorsOf(fs.readFileSync(target, 'utf8')).has(anchor)) {
            broken.push(`${doc}: ${link} (no such heading)`);
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(20);
    expect(broken).toEqual([]);
  });

  it('README.md stays a landing page that leads to every page of docs/', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    expect(readme.split('\n').length).toBeLessThanOrEqual(250);
    // The two commands come first, as CI runs them.
    expect(readme).toMatch(/^# tronwatch\n\n```sh\nnpm ci && npm run demo .*\nnpm test .*\n```/);
    const linked = new Set(relativeLinks(readme).map((l) => l.split('#')[0]));
    for (const doc of DOCS.filter((d) => d.startsWith('docs/'))) {
      expect(linked.has(doc), `README.md links to ${doc}`).toBe(true);
    }
  });

  it('give every heading of a page its own anchor (a repeated heading is reachable only by a suffix)', () => {
    const repeated: string[] = [];
    for (const doc of DOCS) {
      const seen = new Set<string>();
      let fenced = false;
      for (const line of fs.readFileSync(path.join(ROOT, doc), 'utf8').split('\n')) {
        if (line.startsWith('```')) fenced = !fenced;
        const m = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
        if (!m?.[1]) continue;
        const s = slug(m[1]);
        if (seen.has(s)) repeated.push(`${doc}: ${m[1]}`);
        seen.add(s);
      }
    }
    expect(repeated).toEqual([]);
  });

  it('name no file that is not in the repository (SPEC.md, DESIGN.md live outside it)', () => {
    for (const doc of DOCS) {
      const text = fs.readFileSync(path.join(ROOT, doc), 'utf8');
      expect(text, doc).not.toMatch(/\b(SPEC|DESIGN|CONVENTIONS)\.md\b/);
      expect(text, doc).not.toMatch(/\.\.\/shared\//);
    }
  });
});

describe('docs/api.md against the OpenAPI document', () => {
  let h: ApiHarness;
  let doc: Record<string, unknown>;
  const api = fs.readFileSync(path.join(ROOT, 'docs', 'api.md'), 'utf8');
  beforeAll(async () => {
    h = await apiHarness('pglite');
    doc = await openapiDocument(h.app);
  }, 180_000); // an embedded database and its migrations: slow on a loaded machine
  afterAll(async () => {
    await h?.close();
  });

  it('run the CLI as npm run tronwatch inside the repository, never npx tronwatch (issue 40 item 10)', () => {
    // `npx tronwatch` outside the clone may fetch another package of that name from the public
    // registry and run it with the user's key in its environment.
    const bad = DOCS.filter((f) =>
      /npx\s+tronwatch\s+[a-z]/.test(fs.readFileSync(path.join(ROOT, f), 'utf8')),
    );
    expect(bad).toEqual([]);
    expect(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')).toContain(
      'npm run tronwatch -- listen',
    );
  });

  it('lists exactly the operations the API serves', () => {
    const served: string[] = [];
    for (const [p, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(item)) served.push(`${method.toUpperCase()} ${p}`);
    }
    const documented = [...api.matchAll(/^### `([A-Z]+) (\/[^`]*)`$/gm)].map(
      (m) => `${m[1]} ${m[2]}`,
    );
    expect(documented.sort()).toEqual(served.sort());
  });

  it('lists exactly the error codes of ErrorBody, and the event types of the webhooks', () => {
    const schemas = (
      doc.components as {
        schemas: Record<string, { properties: Record<string, { enum?: string[] }> }>;
      }
    ).schemas;
    const codes = schemas.ErrorBody?.properties.code?.enum ?? [];
    expect(codes.length).toBeGreaterThan(10);
    const documented = new Set([...api.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]));
    for (const code of codes) expect(documented.has(code), code).toBe(true);
    // And no code is documented that the API does not have: the codes of the errors table.
    const table = [...api.matchAll(/^\| \d{3} \| `([a-z_]+)` \|/gm)].map((m) => m[1]);
    for (const code of table)
      expect(codes, `${code} documented but not in ErrorBody`).toContain(code);
    for (const type of Object.keys(doc.webhooks as Record<string, unknown>)) {
      expect(api, type).toContain(`\`${type}\``);
    }
  });
});
