import { describe, expect, it } from 'vitest';
import { mayHoldRefusedText, pgTextProblem, refusedTextIn } from '../../gateway/http/pg-text.js';

describe('text PostgreSQL refuses', () => {
  it('finds NUL and unpaired surrogates, and nothing in ordinary text (pairs included)', () => {
    expect(pgTextProblem('a\u0000b')).toMatch(/NUL/);
    expect(pgTextProblem('\ud800')).toMatch(/surrogate/);
    expect(pgTextProblem('x\udc00')).toMatch(/surrogate/);
    expect(pgTextProblem('emoji 😀, ñ, 中文, "quotes", \\ backslash')).toBeUndefined();
  });

  it('names every refused string and key of a JSON value by path', () => {
    const body = { name: 'ok', poses: [{ device_id: 'fine' }, { device_id: 'bad\u0000' }], nested: { 'k\u0000': 1, deep: [['\ud800']] } };
    expect(refusedTextIn(body, undefined).map((e) => e.field)).toEqual(['poses.1.device_id', 'nested.k\ufffd', 'nested.deep.0.0']);
    expect(refusedTextIn({ codes: ['a', '\u0000'] }, 'query').map((e) => e.field)).toEqual(['query.codes.1']);
  });

  it('walks a deeply nested value without overflowing the stack', () => {
    let deep: unknown = '\u0000';
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(refusedTextIn(deep, undefined)).toHaveLength(1);
  });

  it('tells from the JSON text alone when no walk is needed', () => {
    expect(mayHoldRefusedText(JSON.stringify({ a: 'plain 😀' }))).toBe(false);
    expect(mayHoldRefusedText(JSON.stringify({ a: '\u0000' }))).toBe(true);
    expect(mayHoldRefusedText(JSON.stringify({ a: '\ud800' }))).toBe(true);
    expect(mayHoldRefusedText('{"a":"\\uDC01"}')).toBe(true);
  });
});
