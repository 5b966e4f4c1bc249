import { describe, expect, it } from 'vitest';
import { epochSecond, formatInstant, instantFormatter } from '../../shared/reports/instant-format.js';

/** The reference: formatInstant, which asks ICU (or toISOString) for every instant. */
const reference = (second: number, zone: string) => formatInstant(new Date(second * 1000), zone);
const HOUR = 3600;
const utcSecond = (text: string) => Date.parse(text) / 1000;

/** The UTC hours of `year` in which `zone` changes its offset, found hour by hour through ICU. */
function changeHours(zone: string, year: number): number[] {
  const offset = (second: number) => Date.parse(`${reference(second, zone).replace(' ', 'T')}Z`) / 1000 - second;
  const hours: number[] = [];
  let before = offset(utcSecond(`${year}-01-01T00:00:00Z`));
  for (let second = utcSecond(`${year}-01-01T00:00:00Z`); second < utcSecond(`${year + 1}-01-01T00:00:00Z`); second += HOUR) {
    const after = offset(second + HOUR);
    if (after !== before) hours.push(second);
    before = after;
  }
  return hours;
}

describe('instantFormatter: the text formatInstant gives, from an offset per UTC hour', () => {
  // Whole-hour DST, half-hour DST (Lord Howe), odd offsets (Kathmandu +05:45, Chatham +12:45, St John's -03:30),
  // a double daylight time changing at 00:01 local (Goose Bay 1987/88), offsets with seconds (Monrovia -00:44:30
  // until 1972, Amsterdam +00:19:32 until 1937), a skipped day (Apia 2011), negative DST (Dublin), pre-1970.
  const changes: [string, number][] = [
    ['Europe/Madrid', 2026],
    ['Europe/Madrid', 1945],
    ['Asia/Kathmandu', 1985], // +05:30 to +05:45 at local midnight, 1985-12-31T18:30Z
    ['America/Goose_Bay', 1987],
    ['America/Goose_Bay', 1988],
    ['Australia/Lord_Howe', 2026],
    ['Pacific/Chatham', 2026],
    ['America/St_Johns', 1960],
    ['Africa/Monrovia', 1972],
    ['Europe/Amsterdam', 1937],
    ['Pacific/Apia', 2011],
    ['Europe/Dublin', 2026],
  ];
  it.each(changes)('%s %i: every second of each hour holding a change, and ten minutes either side', (zone, year) => {
    const hours = changeHours(zone, year);
    expect(hours.length, 'the year has changes to check').toBeGreaterThan(0);
    const format = instantFormatter(zone);
    const wrong: string[] = [];
    for (const hour of hours) {
      for (let second = hour - 600; second < hour + HOUR + 600; second++) {
        if (format(second) !== reference(second, zone)) wrong.push(`${second}: ${format(second)} != ${reference(second, zone)}`);
      }
    }
    expect(wrong.slice(0, 5)).toEqual([]);
  });

  it('random instants from 1700 to 2100 in many zones, in any order (the caches keyed, not only the last hour)', () => {
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const zones = [
      'UTC',
      'Europe/Madrid',
      'europe/madrid',
      'Asia/Kathmandu',
      'America/Goose_Bay',
      'Pacific/Chatham',
      'Africa/Monrovia',
      'America/Sao_Paulo',
      'Asia/Tehran',
      'Pacific/Kiritimati',
    ];
    const start = utcSecond('1700-01-01T00:00:00Z');
    const span = utcSecond('2100-01-01T00:00:00Z') - start;
    for (const zone of zones) {
      const format = instantFormatter(zone);
      // Clustered like report rows: a few hours visited again and again, and scattered ones.
      const centres = Array.from({ length: 20 }, () => start + Math.floor(random() * span));
      for (let i = 0; i < 1000; i++) {
        const second = i % 2 === 0 ? centres[i % 20]! + Math.floor(random() * 7200) - 3600 : start + Math.floor(random() * span);
        expect(format(second), `${zone} ${second}`).toBe(reference(second, zone));
      }
    }
  });

  it('years outside 1000-9999 go to ICU (sv-SE writes them its own way), and the four-digit ones around them do not change', () => {
    const instants = [
      '1000-01-01T00:00:00Z',
      '0999-12-31T23:30:00Z',
      '1582-10-14T12:00:00Z',
      '1500-03-10T12:00:00Z',
      '0100-03-01T00:00:00Z',
      '-000001-06-01T10:00:00Z',
      '9999-12-31T11:30:00Z',
      '9999-12-31T23:59:59Z',
      '+010000-01-01T00:00:00Z',
      '+012000-06-01T00:00:00Z',
    ];
    for (const zone of ['UTC', 'Pacific/Kiritimati', 'America/New_York', 'Asia/Kathmandu']) {
      const format = instantFormatter(zone);
      for (const text of instants) {
        const second = utcSecond(text);
        for (const delta of [-1, 0, 1, 1800])
          expect(format(second + delta), `${zone} ${text} ${delta}`).toBe(reference(second + delta, zone));
      }
    }
  });

  it('UTC: the ISO text without milliseconds', () => {
    const format = instantFormatter('UTC');
    expect(format(utcSecond('2023-05-20T16:59:02Z'))).toBe('2023-05-20T16:59:02Z');
    expect(format(utcSecond('1969-12-31T23:59:59Z'))).toBe('1969-12-31T23:59:59Z');
    expect(instantFormatter('Europe/Madrid')(utcSecond('2023-05-20T16:59:02Z'))).toBe('2023-05-20 18:59:02');
  });
});

describe('epochSecond: the whole second of an instant given as µs after an origin', () => {
  it('floors, across an origin with milliseconds and before 1970', () => {
    const origin = Date.parse('2026-01-15T00:00:00.250Z');
    expect(epochSecond(origin, 749_999)).toBe(utcSecond('2026-01-15T00:00:00Z'));
    expect(epochSecond(origin, 750_000)).toBe(utcSecond('2026-01-15T00:00:01Z'));
    expect(epochSecond(origin, -250_001)).toBe(utcSecond('2026-01-14T23:59:59Z'));
    const before1970 = Date.parse('1969-12-31T23:59:58.500Z');
    expect(epochSecond(before1970, 499_999)).toBe(-2);
    expect(epochSecond(before1970, 500_000)).toBe(-1);
    expect(epochSecond(before1970, 1_500_000)).toBe(0);
  });

  it('is exact up to 2^53 µs, where a quotient could be feared to round up to the next second', () => {
    for (const micros of [2 ** 53 - 1, 9_007_199_253_999_999, 8_589_934_591_999_999, 4_294_967_295_999_999, 123_456_789_999_999]) {
      expect(epochSecond(0, micros), String(micros)).toBe(Number(BigInt(micros) / 1_000_000n));
    }
  });
});
