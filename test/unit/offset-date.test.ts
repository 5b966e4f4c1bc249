import { describe, expect, it } from 'vitest';
import { formatOffset, formatOffsetDate, localDay, parseOffsetDate } from '../../shared/time/offset-date.js';

const TWO_HOURS = 120;

describe('dates with a fixed offset', () => {
  it('reads the offset sent, and the default one when none is sent', () => {
    expect(parseOffsetDate('2026-05-01T10:00:00.000+02:00', 0)).toEqual({ epochMs: Date.UTC(2026, 4, 1, 8), offsetMinutes: 120 });
    expect(parseOffsetDate('2026-05-01T10:00:00.000+05:30', 0)).toEqual({ epochMs: Date.UTC(2026, 4, 1, 4, 30), offsetMinutes: 330 });
    expect(parseOffsetDate('2026-05-01T10:00:00.000-0300', 0)).toEqual({ epochMs: Date.UTC(2026, 4, 1, 13), offsetMinutes: -180 });
    expect(parseOffsetDate('2026-05-01T10:00:00Z', TWO_HOURS)).toEqual({ epochMs: Date.UTC(2026, 4, 1, 10), offsetMinutes: 0 });
    expect(parseOffsetDate('2026-05-01T10:00:00.000', TWO_HOURS)).toEqual({ epochMs: Date.UTC(2026, 4, 1, 8), offsetMinutes: 120 });
    expect(parseOffsetDate('2026-05-01T10:00', TWO_HOURS)).toEqual({ epochMs: Date.UTC(2026, 4, 1, 8), offsetMinutes: 120 });
    expect(parseOffsetDate('2026-05-01', TWO_HOURS)).toEqual({ epochMs: Date.UTC(2026, 4, 1) - 2 * 3600_000, offsetMinutes: 120 });
    expect(parseOffsetDate('2026-05-01T10:00:00.123456+00:00', 0)?.epochMs).toBe(Date.UTC(2026, 4, 1, 10, 0, 0, 123));
  });

  it('takes a space for a plus (an unencoded + in a query string)', () => {
    expect(parseOffsetDate('2026-05-01T10:00:00.000 02:00', 0)).toEqual(parseOffsetDate('2026-05-01T10:00:00.000+02:00', 0));
  });

  it('refuses what is not a date, or a day or time that does not exist', () => {
    for (const text of [
      'yesterday',
      '',
      '2026-13-01T00:00:00Z',
      '2026-02-30T00:00:00Z',
      '2026-05-01T24:00:00Z',
      '2026-05-01T10:60:00Z',
      '2026-05-01T10:00:00+15:00',
      '2026-05-01T10:00:00+02:75',
      '01/05/2026',
      '2026-05-01T10:00:00.000+02',
      '1969-12-31T00:00:00Z',
    ]) {
      expect(parseOffsetDate(text, TWO_HOURS), text).toBeUndefined();
    }
    expect(parseOffsetDate('2028-02-29T00:00:00Z', 0)).toBeDefined();
  });

  it('writes an instant as local time in an offset, crossing midnight when it must', () => {
    const fix = Date.UTC(2026, 3, 30, 22, 30);
    expect(formatOffsetDate(fix, 120)).toBe('2026-05-01T00:30:00.000+02:00');
    expect(formatOffsetDate(fix, 330)).toBe('2026-05-01T04:00:00.000+05:30');
    expect(formatOffsetDate(fix, -180)).toBe('2026-04-30T19:30:00.000-03:00');
    expect(formatOffsetDate(fix, 0)).toBe('2026-04-30T22:30:00.000+00:00');
    expect(localDay(fix, 120)).toBe('2026-05-01');
    expect(localDay(fix, 0)).toBe('2026-04-30');
    expect(formatOffset(-30)).toBe('-00:30');
  });

  it('round-trips: what is written reads back as the same instant and offset', () => {
    for (const offset of [-720, -570, -180, 0, 60, 330, 345, 840]) {
      const at = Date.UTC(2026, 10, 1, 3, 4, 5, 678);
      expect(parseOffsetDate(formatOffsetDate(at, offset), 999)).toEqual({ epochMs: at, offsetMinutes: offset });
    }
  });
});
