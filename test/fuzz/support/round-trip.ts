import fc from 'fast-check';
import type { JsonSchema } from './schema-arbitrary.js';
import { NO_NUL_PATTERN } from '../../../gateway/http/openapi.js';

/** A step into a JSON value: a property name, or `[]` for every element of an array. */
export type Segment = string | '[]';

/** A free-text string a write takes: where it sits in the body, and its schema (for the lengths it allows). */
export interface TextField {
  /** `name`, `custom_fields[].key`, `[].info`...: how fixtures and failures name it. */
  key: string;
  path: Segment[];
  minLength: number;
  maxLength: number | undefined;
  /** The JSON types the document allows here (a device id may be a string or an integer). */
  types: string[];
}

/** The string branch of a schema (a nullable string is `anyOf: [string, null]`), if it has one. */
function stringSchema(schema: JsonSchema): JsonSchema | undefined {
  if (schema.type === 'string') return schema;
  for (const option of schema.anyOf ?? schema.oneOf ?? []) if (option?.type === 'string') return option;
  return undefined;
}

const keyOf = (path: Segment[]) => path.map((segment, index) => (segment === '[]' ? '[]' : index === 0 ? segment : `.${segment}`)).join('');

/**
 * Every free-text string field of a request body's schema: strings with no `format`, `enum`, `const` or
 * `pattern` (those are validated values, whose refusals the malformed-request fuzz covers), at any depth.
 */
export function textFieldsOf(schema: JsonSchema | undefined, path: Segment[] = []): TextField[] {
  if (!schema || typeof schema !== 'object') return [];
  const text = stringSchema(schema);
  if (text) {
    // The pattern every sent string has (NUL refused) leaves it free text.
    if (text.format || text.enum || text.const !== undefined || (text.pattern && text.pattern !== NO_NUL_PATTERN)) return [];
    const types = (schema.anyOf ?? schema.oneOf ?? [schema]).map((option: JsonSchema) => option?.type).filter(Boolean);
    return [{ key: keyOf(path), path, minLength: text.minLength ?? 0, maxLength: text.maxLength, types }];
  }
  const fields: TextField[] = [];
  for (const option of schema.anyOf ?? schema.oneOf ?? [])
    if (option?.type === 'object' || option?.type === 'array') fields.push(...textFieldsOf(option, path));
  if (schema.type === 'array' && schema.items && typeof schema.items === 'object')
    fields.push(...textFieldsOf(schema.items, [...path, '[]']));
  for (const [name, property] of Object.entries<JsonSchema>(schema.properties ?? {}))
    fields.push(...textFieldsOf(property, [...path, name]));
  return fields;
}

/** A copy of `value` with `replace` applied at `path` (to every element at a `[]`); absent steps are left alone. */
export function setAt(value: unknown, path: Segment[], replace: (current: unknown) => unknown): unknown {
  if (path.length === 0) return replace(value);
  const [head, ...rest] = path;
  if (head === '[]') return Array.isArray(value) ? value.map((element) => setAt(element, rest, replace)) : value;
  if (value === null || typeof value !== 'object' || !(head! in (value as object))) return value;
  return { ...(value as Record<string, unknown>), [head!]: setAt((value as Record<string, unknown>)[head!], rest, replace) };
}

/** The values at `path` (one per array element at a `[]`); undefined where a step is missing. */
export function valuesAt(value: unknown, path: Segment[]): unknown[] {
  if (path.length === 0) return [value];
  const [head, ...rest] = path;
  if (head === '[]') return Array.isArray(value) ? value.flatMap((element) => valuesAt(element, rest)) : [undefined];
  if (value === null || typeof value !== 'object') return [undefined];
  return valuesAt((value as Record<string, unknown>)[head!], rest);
}

/**
 * Pieces the query layer, JSON, HTML and Unicode handling each treat specially: statement, comment and
 * placeholder marks (knex's `?`, PostgreSQL's `$1`), quotes and escapes, an HTML entity, LIKE wildcards, an emoji
 * (a surrogate pair), a combining accent, right-to-left marks, spaces at either end, plus plain letters.
 */
export const TEXT_PIECES = [
  ';',
  "'",
  '"',
  '\\',
  '?',
  '$1',
  '--',
  '/*',
  '*/',
  '&quot;',
  '%',
  '_',
  '😀',
  'e\u0301',
  '\u200f',
  '\u202e',
  ' ',
  'a',
  'Ward 3',
  '<b>',
  '\\?',
  "';--",
];

/** Cuts to `max` UTF-16 code units (what `maxLength` counts) without splitting a surrogate pair. */
export function fitLength(text: string, max: number | undefined): string {
  if (max === undefined || text.length <= max) return text;
  let cut = text.slice(0, max);
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  return cut;
}

/** Text of these pieces, within the field's lengths. */
export function textFor(field: TextField): fc.Arbitrary<string> {
  const pieces = fc
    .array(fc.constantFrom(...TEXT_PIECES), { minLength: Math.max(1, field.minLength), maxLength: 12 })
    .map((parts) => fitLength(parts.join(''), field.maxLength));
  return pieces.filter((text) => text.length >= field.minLength);
}

/** A value exactly `maxLength` code units long (a long text of the pieces), for the documented limit itself. */
export function longestFor(field: TextField, fallback = 5_000): string {
  const length = field.maxLength ?? fallback;
  const unit = `;'"\\?$1--/*&quot;%e\u0301\u200f😀 `;
  let text = unit.repeat(Math.ceil(length / unit.length) + 1).slice(0, length);
  // Never end on half a surrogate pair: replace it by one more ASCII character.
  if (/[\ud800-\udbff]$/.test(text)) text = `${text.slice(0, -1)}x`;
  return text;
}
