/**
 * The import rules of the source tree (CONVENTIONS "Where things live"): the domain and the
 * reader never import the HTTP layers (api/, console/) or the simulators (devnet/), and no module
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

describe('source layout', () => {
  it('finds the tree it checks', () => {
    expect(files.length).toBeGreaterThan(50);
    expect(graph.get(path.join(SRC, 'api', 'app.ts'))?.length).toBeGreaterThan(5);
  });

  it('keeps the domain and the reader free of api/, console/ and devnet/', () => {
    const lower = ['accounts', 'watches', 'events', 'ingest', 'delivery', 'tron', 'net'];
    const upper = ['api', 'console', 'devnet'];
    const bad: string[] = [];
    for (const [file, deps] of graph) {
      if (!lower.includes(top(file) ?? '')) continue;
      for (const d of deps) if (upper.includes(top(d) ?? '')) bad.push(`${rel(file)} → ${rel(d)}`);
    }
    expect(bad).toEqual([]);
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
