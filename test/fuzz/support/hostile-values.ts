import fc from 'fast-check';
import { isKnownDefect } from './fuzz-settings.js';
import { RawJson } from './schema-arbitrary.js';

/** `[[[…]]]` or `{"a":{"a":…}}` nested `depth` deep, as JSON text (built without recursion). */
export function deepJson(depth: number, kind: 'array' | 'object' = 'array'): RawJson {
  const text = kind === 'array' ? '['.repeat(depth) + ']'.repeat(depth) : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
  return new RawJson(text, `${kind} nested ${depth} deep`);
}

/** Numbers at and past the edges of a double and of the integers PostgreSQL and JavaScript hold exactly. */
export const EXTREME_NUMBERS = [
  1e308,
  -1e308,
  1.7976931348623157e308,
  -1.7976931348623157e308,
  1e20,
  -1e20,
  5e-324,
  -0,
  2 ** 53 + 2,
  -(2 ** 53) - 2,
  2 ** 31,
  -(2 ** 31) - 1,
  2 ** 63,
  0.5,
  -1,
];

/** Text JSON.parse turns into values no JavaScript literal serialises to: Infinity, -Infinity, -0, lost precision. */
const NON_FINITE_LOOKING = [
  '1e400',
  '-1e400',
  '-0',
  '-0.0',
  '1E+308',
  '123456789012345678901234567890',
  '0.0000000000000000000000000000001e-400',
];

/** Strings PostgreSQL, JSON, regexes, UTF-8 encoders and naive parsers each choke on. */
const ALL_HOSTILE_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  'NaN',
  'Infinity',
  '-Infinity',
  '1e308',
  '-0',
  '0x1F',
  'null',
  'true',
  '[]',
  '{}',
  "'; drop table users; --",
  '../../../../etc/passwd',
  '%00',
  '%',
  '\u202e\u0007\u001b[31m',
  '<script>alert(1)</script>',
  '\\',
  '"',
  '𝕏'.repeat(300),
  '2024-02-30T25:61:61Z',
  '-2147483649',
  '9007199254740993',
  '00000000-0000-0000-0000-000000000000',
];
/** (NUL is left out while its known defect is listed: it would hide every other finding of an operation.) */
export const HOSTILE_STRINGS = isKnownDefect('nul-to-postgres')
  ? ALL_HOSTILE_STRINGS.filter((text) => !text.includes('\u0000'))
  : ALL_HOSTILE_STRINGS;

const longString = fc
  .constantFrom(1_000, 10_001, 100_001)
  .chain((length) =>
    fc
      .constantFrom(...['a', 'é', '\u0000', '😀'].filter((unit) => unit !== '\u0000' || !isKnownDefect('nul-to-postgres')))
      .map((unit) => unit.repeat(length)),
  );

/** Any JSON-ish value that is wrong for a field: other types, extremes, hostile text, deep nesting. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom<unknown>(...EXTREME_NUMBERS) },
  { weight: 2, arbitrary: fc.constantFrom(...NON_FINITE_LOOKING).map((text) => new RawJson(text, text)) },
  { weight: 5, arbitrary: fc.constantFrom(...HOSTILE_STRINGS) },
  { weight: 1, arbitrary: longString },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom(1, 64, 1_000, 10_000, 100_000)
      .chain((depth) => fc.constantFrom<'array' | 'object'>('array', 'object').map((kind) => deepJson(depth, kind))),
  },
  { weight: 2, arbitrary: fc.constantFrom<unknown>(null, true, false, 0, [], {}, [null], { '': null }, [[]]) },
  { weight: 1, arbitrary: fc.array(fc.constantFrom<unknown>(1e308, '\u0001', null, {}), { minLength: 1000, maxLength: 1000 }) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
);

/** Keys an object should ignore or refuse: prototype pollution, empty, hostile and long names. */
export const unknownKey = fc.constantFrom(
  '__proto__',
  'constructor',
  'prototype',
  '',
  '\u0000key',
  'x'.repeat(10_000),
  'unknown_field',
  'id',
  'organization_id',
  '$where',
);

/**
 * A hostile value for a URL (query value or path segment), already percent-encoded: the raw forms matter, since
 * fetch would refuse or rewrite a lone surrogate, and `%ED%A0%80` is what one looks like as (invalid) UTF-8.
 */
export const hostileUrlText: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_STRINGS.filter((s) => !/[\ud800-\udfff]/.test(s))).map((s) => encodeURIComponent(s)) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      ...(isKnownDefect('nul-to-postgres') ? [] : ['%00', 'a%00b']),
      '%ED%A0%80',
      '%FF',
      '%C0%AF',
      '%',
      '%zz',
      '%2F',
      '%2e%2e',
      '%E2%80%AE',
      '+',
      '%20',
      '%0d%0a',
    ),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      ...EXTREME_NUMBERS.map(String),
      '1e400',
      '-1e400',
      '1.5',
      '0',
      '-1',
      '99999999999999999999',
      '0x10',
      '1_000',
    ),
  },
  // Long, within a request head of 4 KiB with two of them in a path (see MAX_URL_BYTES in http-operations.ts).
  { weight: 1, arbitrary: fc.constantFrom(300, 1_200).map((length) => 'x'.repeat(length)) },
  { weight: 2, arbitrary: fc.string({ maxLength: 20 }).map((s) => encodeURIComponent(s.replace(/[\ud800-\udfff]/g, ''))) },
);
