/**
 * docs/operating.md's configuration table is the config schema's (src/config.ts), written by
 * `npm run docs:config` (src/config-docs.ts): the page fails this test as soon as a variable is
 * added, removed, renamed or redescribed in the schema without the page being regenerated.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { EnvSchema } from '../../src/config.js';
import {
  CONFIG_TABLE_BEGIN,
  CONFIG_TABLE_END,
  configTable,
  withConfigTable,
} from '../../src/config-docs.js';

const PAGE = path.resolve(import.meta.dirname, '..', '..', 'docs', 'operating.md');
const page = fs.readFileSync(PAGE, 'utf8');

describe("docs/operating.md's configuration table", () => {
  it('is exactly what the schema gives (run `npm run docs:config` after changing src/config.ts)', () => {
    expect(page).toContain(CONFIG_TABLE_BEGIN);
    expect(page).toContain(CONFIG_TABLE_END);
    expect(withConfigTable(page)).toBe(page);
  });

  it('has one row per variable the service reads, each once, in the schema order', () => {
    const table = page.slice(page.indexOf(CONFIG_TABLE_BEGIN), page.indexOf(CONFIG_TABLE_END));
    const rows = [...table.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]);
    expect(rows).toEqual(Object.keys(EnvSchema.properties));
    expect(new Set(rows).size).toBe(rows.length);
  });

  it('shows defaults, bounds and units from the schema', () => {
    const table = configTable();
    expect(table).toMatch(
      /^\| `TRON_NODE_TIMEOUT_MS` \| .* \| integer, ms, 100 to 120,000 \| `10000` \|$/m,
    );
    expect(table).toMatch(/^\| `CONSOLE_SIGNUP` \| .* \| `open`, `closed` \| `closed` \|$/m);
    expect(table).toMatch(
      /^\| `DATABASE_URL` \| .* \| unset: embedded PGlite in `DATA_DIR\/pgdata` \|$/m,
    );
  });

  it('refuses a page whose table was edited by hand', () => {
    const edited = page.replace(
      /^\| `PORT` \| [^\n]*$/m,
      '| `PORT` | API listen port. | integer | `80` |',
    );
    expect(edited).not.toBe(page);
    expect(withConfigTable(edited)).not.toBe(edited);
  });
});
