/**
 * The import rules of the source tree (CONVENTIONS "Where things live"): every folder below the
 * HTTP layers (the domain, the reader, audit, secrets, mail, telegram, retention, redis, rate-limit,
 * common, db… and any new one) and src/config.ts never import the HTTP layers (api/, console/,
 * mcp/) or the simulators (devnet/); the console shares helpers with the API through modules
 * below both (src/common/query.ts), not api/routes/events.ts; and no module
 * imports itself through a cycle (type-only imports included: a cycle of types is a layering
 * mistake too). Read from the files' import statements, as text.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '..', '..', 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = path.join(dir, d.name);
    if (d.isDirectory()) return sourceFiles(p);
    return d.name.endsWith('.ts') ? [p] : [];
  });
}

/** The src/ files a module imports (relative `.js` specifiers, static or dynamic). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)\.js'/g)) {
    out.push(path.resolve(path.dirname(file), `${m[1]}.ts`));
  }
  return out;
}

const files = sourceFiles(SRC);
const graph = new Map(files.map((f) => [f, importsOf(f)]));
const rel = (f: string) => path.relative(SRC, f);
const top = (f: string) => rel(f).split(path.sep)[0];

/** The folders of src/. */
const folders = readdirSync(SRC, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name);
/** The HTTP layers and the simulators: the layers nothing below them may import. */
const FORBIDDEN = ['api', 'console', 'mcp', 'devnet'];
/** The folders above the domain: the HTTP layers (mcp/ serves POST /mcp) and the simulators. */
const UPPER = FORBIDDEN;
/** The files at src/'s root that compose every layer (the CLI and the service). */
const ROOTS = ['main.ts', 'service.ts'];
/** A file below the HTTP layers: in a folder not in UPPER, or at src/'s root but for ROOTS. */
const isLower = (f: string) => {
  const t = top(f) ?? '';
  return t.endsWith('.ts') ? !ROOTS.includes(t) : !UPPER.includes(t);
};

describe('source layout', () => {
  it('finds the tree it checks', () => {
    expect(files.length).toBeGreaterThan(50);
    expect(graph.get(path.join(SRC, 'api', 'app.ts'))?.length).toBeGreaterThan(5);
  });

  it('keeps every folder below the HTTP layers free of api/, console/, mcp/ and devnet/', () => {
    const lower = folders.filter((d) => !UPPER.includes(d));
    expect(isLower(path.join(SRC, 'config.ts'))).toBe(true);
    // Every domain folder is checked, a new one too (it is lower unless named in UPPER).
    for (const d of [
      'accounts',
      'audit',
      'common',
      'db',
      'delivery',
      'doctor',
      'events',
      'ingest',
      'mail',
      'net',
      'rate-limit',
      'redis',
      'retention',
      'secrets',
      'telegram',
      'tron',
      'watches',
    ]) {
      expect(lower, d).toContain(d);
    }
    const bad: string[] = [];
    for (const [file, deps] of graph) {
      if (!isLower(file)) continue;
      for (const d of deps)
        if (FORBIDDEN.includes(top(d) ?? '')) bad.push(`${rel(file)} → ${rel(d)}`);
    }
    expect(bad).toEqual([]);
  });

  it('has the console share query helpers with the API through a module below both, not api/routes/events.ts', () => {
    const bad: string[] = [];
    for (const [file, deps] of graph) {
      if (top(file) !== 'console') continue;
      for (const d of deps) {
        if (rel(d).startsWith(`api${path.sep}routes${path.sep}events`))
          bad.push(`${rel(file)} → ${rel(d)}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('keeps the roles apart: the bot (telegram/), delivery/ and retention/ never import ingest/ (leader election is db/ plumbing)', () => {
    const roles = ['telegram', 'delivery', 'retention'];
    const bad: string[] = [];
    for (const [file, deps] of graph) {
      if (!roles.includes(top(file) ?? '')) continue;
      for (const d of deps) if (top(d) === 'ingest') bad.push(`${rel(file)} → ${rel(d)}`);
    }
    expect(bad).toEqual([]);
    expect(graph.get(path.join(SRC, 'telegram', 'updates.ts'))).toContain(
      path.join(SRC, 'db', 'leader.ts'),
    );
  });

  it('pauses a failing watch and a failing endpoint through one helper (src/watches/auto-pause.ts)', () => {
    // The only statements that set auto_paused_at are the helper's: the watch's and the
    // endpoint's health refresh call it instead of keeping a copy of the rule each.
    const writers = files.filter((f) =>
      /SET[^`]*auto_paused_at\s*=\s*\$/.test(readFileSync(f, 'utf8')),
    );
    expect(writers.map(rel)).toEqual([path.join('watches', 'auto-pause.ts')]);
    const helper = path.join(SRC, 'watches', 'auto-pause.ts');
    expect(graph.get(path.join(SRC, 'watches', 'health.ts'))).toContain(helper);
    expect(graph.get(path.join(SRC, 'endpoints', 'health.ts'))).toContain(helper);
  });

  it('has no import cycle', () => {
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const stack: string[] = [];
    const visit = (f: string) => {
      state.set(f, 'open');
      stack.push(f);
      for (const d of graph.get(f) ?? []) {
        if (state.get(d) === 'open') {
          cycles.push([...stack.slice(stack.indexOf(d)), d].map(rel).join(' → '));
        } else if (!state.has(d) && graph.has(d)) {
          visit(d);
        }
      }
      stack.pop();
      state.set(f, 'done');
    };
    for (const f of files) if (!state.has(f)) visit(f);
    expect(cycles).toEqual([]);
  });
});
