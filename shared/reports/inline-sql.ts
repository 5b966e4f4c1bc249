import type { Sql } from './report-sql.js';

/**
 * `sql` with its parameters written into the text as literals, as MikroORM's execute would write them (it sends
 * no bind parameters: `formatQuery` inlines each one, escaping a string a character at a time, about 0.25 µs per
 * character). The materializer's statements carry hundreds of kilobytes of arrays (a fence grid, a batch's
 * segments): inlined here, where a string without quote or backslash is written as it is, formatQuery has nothing
 * left to do. Quotes are doubled, and a string holding a backslash becomes E'...' with it doubled, as pg's
 * escapeLiteral does. Every `?` of the text is a parameter (none of these statements uses `?` otherwise).
 */
export function inlined(sql: Sql): Sql {
  let i = 0;
  const text = sql.text.replace(/\?/g, () => {
    if (i >= sql.params.length) throw new Error('more ? than parameters');
    return literal(sql.params[i++]);
  });
  if (i !== sql.params.length) throw new Error('more parameters than ?');
  return { text, params: [] };
}

function literal(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new RangeError(`not a finite number: ${value}`);
    return `(${value})`;
  }
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value !== 'string') throw new TypeError(`cannot inline a ${typeof value}`);
  if (!/['\\]/.test(value)) return `'${value}'`;
  const quoted = `'${value.replace(/'/g, "''").replace(/\\/g, '\\\\')}'`;
  return value.includes('\\') ? ` E${quoted}` : quoted;
}
