/**
 * PostgreSQL array literals (`{1,2,NULL}`, `{"a","b\"c"}`), bound as one text parameter and cast in SQL
 * (`?::float8[]`). knex expands JS arrays bound to `?` into lists, so whole columns for `unnest()` travel this
 * way: one statement inserts a whole batch with a fixed number of parameters.
 */
const NEEDS_ESCAPE = /["\\]/;

export function pgArray(values: readonly (string | number | boolean | null | undefined)[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out += ',';
    const value = values[i];
    if (value === null || value === undefined) out += 'NULL';
    else if (typeof value === 'number') {
      if (!Number.isFinite(value)) throw new RangeError(`not a finite number: ${value}`);
      out += String(value);
    } else if (typeof value === 'boolean') out += value ? 't' : 'f';
    // Most values (ids, uuids) hold neither quote nor backslash: test once rather than replace twice.
    else out += NEEDS_ESCAPE.test(value) ? `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"` : `"${value}"`;
  }
  return `${out}}`;
}
