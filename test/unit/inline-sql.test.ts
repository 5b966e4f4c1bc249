import fc from 'fast-check';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { inlined } from '../../shared/reports/inline-sql.js';
import { sqlOf } from '../../shared/reports/report-sql.js';

describe('inlined (the materializer writes its parameters into the text itself)', () => {
  it('writes a string as pg escapeLiteral does (what MikroORM would have sent)', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', "'", '\\', '"', '{', ',', 'é', ' ') }), (value) => {
        expect(inlined(sqlOf('select ?::text', value)).text).toBe(`select ${pg.Client.prototype.escapeLiteral(value)}::text`);
      }),
    );
  });

  it('numbers in parentheses, null, booleans; each ? once, in order, and no parameter left', () => {
    expect(inlined(sqlOf('select ?, ? - ?, ?, ?', -1, 2.5, 3, null, true))).toEqual({
      text: 'select (-1), (2.5) - (3), null, true',
      params: [],
    });
    expect(inlined(sqlOf('select ?', "it's"))).toEqual({ text: "select 'it''s'", params: [] });
    expect(() => inlined(sqlOf('select ?, ?', 1))).toThrow();
    expect(() => inlined(sqlOf('select ?', 1, 2))).toThrow();
    expect(() => inlined(sqlOf('select ?', Number.NaN))).toThrow();
  });
});
