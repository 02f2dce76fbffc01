/**
 * The configuration table of docs/operating.md, written from the config schema ({@link EnvSchema},
 * src/config.ts) so the page cannot drift from what the service reads: one row per environment
 * variable, in the schema's order, with its text (`description`), its type and bounds, and its
 * default (`default` with its `defaultNote`, or for an optional variable what `unset` means).
 *
 * `npm run docs:config` writes it between {@link CONFIG_TABLE_BEGIN} and {@link CONFIG_TABLE_END};
 * test/unit/config-docs.test.ts fails when the page holds anything else there.
 */
import { EnvSchema } from './config.js';

/** The marker line after which the generated table starts in docs/operating.md. */
export const CONFIG_TABLE_BEGIN =
  '<!-- configuration table: generated from src/config.ts by `npm run docs:config`; do not edit -->';
/** The marker line that ends the generated table. */
export const CONFIG_TABLE_END = '<!-- end of the configuration table -->';

/** What a variable's schema carries that the table shows (TypeBox options, JSON Schema words). */
interface VariableSchema {
  type?: string;
  description?: string;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minLength?: number;
  pattern?: string;
  anyOf?: { const?: unknown }[];
  unset?: string;
  defaultNote?: string;
}

/** The unit a variable's value is in, from its name's standard suffix ('' when it has none). */
function unitOf(name: string): string {
  if (name.endsWith('_MS')) return 'ms';
  if (name.endsWith('_SECONDS')) return 'seconds';
  if (name.endsWith('_MINUTES')) return 'minutes';
  if (name.endsWith('_HOURS')) return 'hours';
  if (name.endsWith('_DAYS')) return 'days';
  return '';
}

/** A number as the table writes it: digits grouped by thousands with commas. */
function num(n: number): string {
  return n.toLocaleString('en-US');
}

/** The "value" column: type, unit and bounds, e.g. "integer, ms, 100 to 120,000". */
function valueColumn(name: string, s: VariableSchema): string {
  if (s.anyOf) {
    return s.anyOf.map((v) => `\`${String(v.const)}\``).join(', ');
  }
  const parts: string[] = [];
  const type = s.type === 'integer' ? 'integer' : s.type === 'number' ? 'number' : 'text';
  parts.push(type);
  const unit = unitOf(name);
  if (unit) parts.push(unit);
  if (s.exclusiveMinimum !== undefined && s.maximum !== undefined) {
    parts.push(`in (${num(s.exclusiveMinimum)}, ${num(s.maximum)}]`);
  } else if (s.minimum !== undefined && s.maximum !== undefined) {
    parts.push(`${num(s.minimum)} to ${num(s.maximum)}`);
  } else if (s.minimum !== undefined) {
    parts.push(`at least ${num(s.minimum)}`);
  }
  if (s.pattern) parts.push(`matching \`${s.pattern.replace(/\\\\/g, '\\')}\``);
  return parts.join(', ');
}

/** The "default" column. */
function defaultColumn(s: VariableSchema): string {
  if (s.default !== undefined) {
    const d = s.default === '' ? 'empty' : `\`${String(s.default)}\``;
    return s.defaultNote ? `${d} (${s.defaultNote})` : d;
  }
  return s.unset ? `unset: ${s.unset}` : 'unset';
}

/** A table cell: no line breaks, and a `|` cannot end the cell early. */
function cell(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');
}

/**
 * The Markdown table, one row per variable of {@link EnvSchema}, without the markers.
 * Throws when a variable has no description (every variable is documented, or none is read).
 */
export function configTable(): string {
  const rows = ['| variable | meaning | value | default |', '|---|---|---|---|'];
  for (const [name, raw] of Object.entries(EnvSchema.properties)) {
    const s = raw as VariableSchema;
    if (!s.description) throw new Error(`${name} has no description in src/config.ts`);
    rows.push(
      `| \`${name}\` | ${cell(s.description)} | ${cell(valueColumn(name, s))} | ${cell(defaultColumn(s))} |`,
    );
  }
  return rows.join('\n');
}

/**
 * `page` with the text between the markers replaced by {@link configTable}.
 * Throws when either marker is missing or they are out of order.
 */
export function withConfigTable(page: string): string {
  const begin = page.indexOf(CONFIG_TABLE_BEGIN);
  const end = page.indexOf(CONFIG_TABLE_END);
  if (begin < 0 || end < begin) {
    throw new Error('docs/operating.md lacks the configuration table markers');
  }
  return `${page.slice(0, begin + CONFIG_TABLE_BEGIN.length)}\n\n${configTable()}\n\n${page.slice(end)}`;
}
