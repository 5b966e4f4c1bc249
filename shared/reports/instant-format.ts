import { LruCache } from '../lru-cache.js';

/**
 * Dates out: an instant in UTC (`2023-05-20T16:59:02Z`), or, for another time zone, the local wall-clock time
 * with no offset (`2023-05-20 18:59:02`), as the spec shows.
 */
export function formatInstant(value: Date | string, timeZone: string): string {
  const date = new Date(value);
  if (timeZone === 'UTC') return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
  return localFormat(timeZone).format(date);
}

/**
 * One formatter per time zone: building an Intl.DateTimeFormat costs far more than formatting with it. Bounded:
 * zone names are accepted in any letter case, so a client could otherwise add entries without end.
 */
const localFormats = new LruCache<string, Intl.DateTimeFormat>({ maxEntries: 1000 });
function localFormat(timeZone: string): Intl.DateTimeFormat {
  let format = localFormats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('sv-SE', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    });
    localFormats.set(timeZone, format);
  }
  return format;
}

const HOUR_S = 3600;
const CACHE_ENTRIES = 4096;
const DAY_S = 86_400;
const TWO_DIGITS = Array.from({ length: 60 }, (_, i) => String(i).padStart(2, '0'));
const SECONDS_UTC = TWO_DIGITS.map((ss) => `${ss}Z`);
/**
 * What sv-SE prints for the years the fast path serves, 1000 to 9999 (ICU's calendar is proleptic Gregorian, as
 * Date's): four-digit years, 24-hour clock. Other years (sv-SE writes year -1 as "2") go to ICU row by row.
 */
const LOCAL_TEXT = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/;

/**
 * Formats whole epoch seconds exactly as formatInstant formats the same instants, for the many rows of one
 * report in one zone. ICU is asked once per UTC hour, not once per row: the zone's offset at the hour's first
 * and last second; when they agree, every second of the hour has that offset, since no zone in the tz database
 * changes its offset twice within days, let alone within an hour (the shortest gap between two changes is about
 * four days, Africa/Freetown 1939). The hour holding a change, and years outside 1000-9999, are formatted by
 * ICU row by row. The text is a cached minute ("…T14:05:") plus the second.
 * One formatter per report: its caches are dropped whole when full (rows in time order use a handful).
 */
export function instantFormatter(timeZone: string): (epochSecond: number) => string {
  const minutes = new Map<number, string>();
  const minuteText = (minute: number, text: (minute: number) => string) => {
    let cached = minutes.get(minute);
    if (cached === undefined) {
      if (minutes.size >= CACHE_ENTRIES) minutes.clear();
      minutes.set(minute, (cached = text(minute)));
    }
    return cached;
  };
  if (timeZone === 'UTC') {
    // Up to "HH:MM:" of "…HH:MM:00.000Z", whatever the width of the year.
    const utcMinute = (minute: number) => new Date(minute * 60_000).toISOString().slice(0, -7);
    return (second) => {
      const minute = Math.floor(second / 60);
      return minuteText(minute, utcMinute) + SECONDS_UTC[second - minute * 60]!;
    };
  }
  const format = localFormat(timeZone);
  /** Per UTC hour, the offset in seconds of all its seconds, or NaN: the hour is formatted by ICU row by row. */
  const hours = new Map<number, number>();
  const hourOffset = (hour: number) => {
    let offset = hours.get(hour);
    if (offset === undefined) {
      const first = offsetAt(format, hour * HOUR_S);
      offset = first === offsetAt(format, hour * HOUR_S + HOUR_S - 1) ? first : Number.NaN;
      if (hours.size >= CACHE_ENTRIES) hours.clear();
      hours.set(hour, offset);
    }
    return offset;
  };
  // Between two hour ends ICU prints with four-digit years, so does toISOString.
  const localMinute = (minute: number) => {
    const day = Math.floor(minute / 1440);
    const ofDay = minute - day * 1440;
    return `${new Date(day * DAY_S * 1000).toISOString().slice(0, 10)} ${TWO_DIGITS[Math.floor(ofDay / 60)]}:${TWO_DIGITS[ofDay % 60]}:`;
  };
  return (second) => {
    const offset = hourOffset(Math.floor(second / HOUR_S));
    if (Number.isNaN(offset)) return format.format(second * 1000);
    const local = second + offset;
    const minute = Math.floor(local / 60);
    return minuteText(minute, localMinute) + TWO_DIGITS[local - minute * 60]!;
  };
}

/**
 * The zone's offset in seconds at `second` as ICU applies it (local wall clock minus UTC), or NaN for a local
 * year outside the fast path.
 */
function offsetAt(format: Intl.DateTimeFormat, second: number): number {
  const text = LOCAL_TEXT.exec(format.format(second * 1000));
  if (!text) return Number.NaN;
  const [, year, month, day, hh, mm, ss] = text.map(Number) as number[];
  return Date.UTC(year!, month! - 1, day!, hh!, mm!, ss!) / 1000 - second;
}

/**
 * Whole epoch seconds of an instant given as µs after `originMs` (floored, as the printed time truncates).
 * Exact while the µs stay integers below 2^53 (285 years): a quotient under 2^34 is within 1e-6 of the
 * true one by less than half a unit in the last place, so it never rounds across a whole second.
 */
export function epochSecond(originMs: number, microsAfter: number): number {
  const originSecond = Math.floor(originMs / 1000);
  return originSecond + Math.floor(((originMs - originSecond * 1000) * 1000 + microsAfter) / 1e6);
}
