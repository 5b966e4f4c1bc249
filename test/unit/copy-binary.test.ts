import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BinaryCopyEncoder } from '../../shared/positions/copy-binary.js';

/** The bytes of one row holding one field written by `write`, without header and trailer. */
const field = (write: (copy: BinaryCopyEncoder) => void): Buffer => {
  const copy = new BinaryCopyEncoder(0);
  copy.row(1);
  write(copy);
  const stream = copy.finish();
  return stream.subarray(19 + 2, stream.length - 2);
};

/** What PostgreSQL's timestamptz_send writes for epoch ms, computed with BigInt. */
const timestampBytes = (epochMs: number): Buffer => {
  const bytes = Buffer.alloc(12);
  bytes.writeInt32BE(8, 0);
  bytes.writeBigInt64BE((BigInt(epochMs) - 946_684_800_000n) * 1000n, 4);
  return bytes;
};

describe('binary COPY encoder', () => {
  it('writes the PGCOPY header, the field count of each row and the -1 trailer', () => {
    const copy = new BinaryCopyEncoder();
    copy.row(2);
    copy.int4(7);
    copy.bool(null);
    expect(copy.finish().toString('hex')).toBe(
      `${Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1').toString('hex')}000000000000000000020000000400000007ffffffffffff`,
    );
  });

  it('writes NULL (and undefined) as a length of -1 for every type', () => {
    const nulls = [
      field((c) => c.uuid(null)),
      field((c) => c.text(undefined)),
      field((c) => c.int4(null)),
      field((c) => c.bool(undefined)),
      field((c) => c.float8(null)),
      field((c) => c.timestamptz(null)),
    ];
    for (const bytes of nulls) expect(bytes.toString('hex')).toBe('ffffffff');
  });

  it('writes timestamps as int64 µs since 2000-01-01, exactly for whole ms before 2000 and far in the future', () => {
    expect(field((c) => c.timestamptz(Date.UTC(2000, 0, 1)))).toEqual(timestampBytes(Date.UTC(2000, 0, 1)));
    expect(field((c) => c.timestamptz(0)).toString('hex')).toBe('00000008' + 'fffca2fec4c82000'); // -946,684,800 s
    fc.assert(
      fc.property(fc.integer({ min: -8.64e15, max: 8.64e15 }), (epochMs) => {
        expect(field((c) => c.timestamptz(epochMs))).toEqual(timestampBytes(epochMs));
      }),
      { seed: 15, numRuns: 5000 },
    );
  });

  it('rounds a fraction of a millisecond to the microsecond', () => {
    const bytes = field((c) => c.timestamptz(Date.UTC(2026, 0, 1) + 0.0014));
    expect(bytes.readBigInt64BE(4)).toBe((BigInt(Date.UTC(2026, 0, 1)) - 946_684_800_000n) * 1000n + 1n);
    expect(field((c) => c.timestamptz(-0.9996)).readBigInt64BE(4)).toBe(-946_684_800_000_000n - 1000n);
  });

  it('writes a uuid as its 16 bytes, from the canonical form or 32 hex digits, any case', () => {
    const hex = '0123456789abcdef0123456789ABCDEF';
    const expected = `00000010${hex.toLowerCase()}`;
    expect(field((c) => c.uuid('01234567-89ab-cdef-0123-456789ABCDEF')).toString('hex')).toBe(expected);
    expect(field((c) => c.uuid(hex)).toString('hex')).toBe(expected);
  });

  it('writes each uuid of a row sequence right, repeated ones (served from the last one parsed) included', () => {
    const a = crypto.randomUUID();
    const b = crypto.randomUUID();
    const copy = new BinaryCopyEncoder(0);
    for (const uuid of [a, a, b, a, b, b]) {
      copy.row(1);
      copy.uuid(uuid);
    }
    const stream = copy.finish();
    const written = Array.from({ length: 6 }, (_, i) => stream.subarray(19 + i * 22 + 6, 19 + i * 22 + 22).toString('hex'));
    expect(written).toEqual([a, a, b, a, b, b].map((uuid) => uuid.replace(/-/g, '')));
  });

  it('refuses a malformed uuid rather than sending something else', () => {
    for (const bad of [
      '',
      'not-a-uuid',
      '01234567-89ab-cdef-0123-456789abcde',
      '01234567+89ab-cdef-0123-456789abcdef',
      '0123456789abcdef0123456789abcdeg',
      '0123456789abcdef0123456789abcde\u0130',
    ]) {
      expect(() => field((c) => c.uuid(bad)), bad).toThrow(TypeError);
    }
  });

  it('refuses numbers the text path refuses too: non-finite floats and times, non-integer or out-of-range int4', () => {
    for (const value of [Number.NaN, Infinity, -Infinity]) {
      expect(() => field((c) => c.float8(value))).toThrow(RangeError);
      expect(() => field((c) => c.timestamptz(value))).toThrow(RangeError);
    }
    for (const value of [1.5, 2 ** 31, -(2 ** 31) - 1]) expect(() => field((c) => c.int4(value))).toThrow(RangeError);
    expect(field((c) => c.int4(-(2 ** 31))).toString('hex')).toBe('00000004' + '80000000');
  });

  it('writes text as UTF-8 with its exact byte length, a lone surrogate included', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), (text) => {
        const bytes = field((c) => c.text(text));
        const length = bytes.readInt32BE(0);
        expect(length).toBe(bytes.length - 4);
        expect(bytes.subarray(4)).toEqual(Buffer.from(text, 'utf8'));
      }),
      { seed: 15, numRuns: 500 },
    );
    expect(
      field((c) => c.text('a\uD800b'))
        .subarray(4)
        .toString('utf8'),
    ).toBe('a\uFFFDb');
  });

  it('grows its one buffer without changing a byte: a tiny first guess gives the same stream as a large one', () => {
    const write = (copy: BinaryCopyEncoder) => {
      for (let i = 0; i < 500; i++) {
        copy.row(5);
        copy.text(`device-${i}-é漢😀`);
        copy.float8(i / 7 - 30);
        copy.timestamptz(1_763_900_000_000 + i);
        copy.uuid(null);
        copy.bool(i % 2 === 0);
      }
      return copy.finish();
    };
    expect(write(new BinaryCopyEncoder(0))).toEqual(write(new BinaryCopyEncoder(1 << 20)));
  });
});
