/**
 * `npm run docs:config`: writes the configuration table of docs/operating.md from the config
 * schema (src/config-docs.ts). Run it after adding or changing a variable in src/config.ts;
 * test/unit/config-docs.test.ts fails until the page matches the schema.
 */
import fs from 'node:fs';
import path from 'node:path';
import { withConfigTable } from '../src/config-docs.js';

const file = path.resolve(import.meta.dirname, '..', 'docs', 'operating.md');
const before = fs.readFileSync(file, 'utf8');
const after = withConfigTable(before);
if (after === before) {
  console.log('docs/operating.md: the configuration table is up to date');
} else {
  fs.writeFileSync(file, after);
  console.log('docs/operating.md: the configuration table was rewritten from src/config.ts');
}
