import type { RawQuery } from './route.js';

/**
 * Parses a query string the way clients of this API send it: `a=1&a=2`, `a[]=1&a[]=2` (axios, brackets
 * percent-encoded or not) all become `{ a: ['1', '2'] }`; a single `a=1` stays a string. Comma-separated
 * lists are split by the schemas that expect arrays (`csvList`), not here.
 */
export function parseQuery(queryString: string): RawQuery {
  const query: RawQuery = {};
  if (!queryString) return query;
  for (const [rawKey, value] of new URLSearchParams(queryString)) {
    const isArrayForm = rawKey.endsWith('[]');
    const key = isArrayForm ? rawKey.slice(0, -2) : rawKey;
    const existing = query[key];
    if (existing === undefined) query[key] = isArrayForm ? [value] : value;
    else if (Array.isArray(existing)) existing.push(value);
    else query[key] = [existing, value];
  }
  return query;
}
