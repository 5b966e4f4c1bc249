/**
 * Instants written with a fixed UTC offset, as the history endpoints take and return them
 * (`2026-05-01T10:00:00.000+02:00`). A fixed offset, not a time-zone rule: the spec's default is "GMT+2",
 * whatever the season. Pure functions, no clock.
 */

/** The instant plus the offset it was written in (minutes east of UTC). */
export interface OffsetDate {
  epochMs: number;
  offsetMinutes: number;
}

const MINUTE_MS = 60_000;
/** Real offsets run from -12:00 to +14:00. */
const MAX_OFFSET_MINUTES = 14 * 60;

// Date, optionally a time (seconds and fraction optional), optionally an offset (Z, ±HH:MM or ±HHMM). A space
// stands for `+`: an unencoded `+` in a query string arrives as a space.
const PATTERN = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+\- ]\d{2}:?\d{2})?)?$/i;

/**
 * Parses `YYYY-MM-DDTHH:mm:ss.SSS±HH:MM` (and its shorter forms: no fraction, no seconds, `Z`, `±HHMM`, a date
 * alone meaning its midnight). Without an offset, `defaultOffsetMinutes` applies. `undefined` when the text is
 * not such a date or names a day or time that does not exist (2026-02-30, 24:00, +15:00).
 */
export function parseOffsetDate(text: string, defaultOffsetMinutes: number): OffsetDate | undefined {
  const match = PATTERN.exec(text.trim());
  if (!match) return undefined;
  const [, y, mo, d, h = '0', mi = '0', s = '0', fraction = '', zone] = match;
  const [year, month, day, hour, minute, second] = [y, mo, d, h, mi, s].map(Number) as [number, number, number, number, number, number];
  if (year < 1970 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return undefined;
  const millisecond = Number(fraction.padEnd(3, '0').slice(0, 3));
  const wallClock = Date.UTC(year, month - 1, day, hour, minute, second, millisecond);
  // Date.UTC rolls 2026-02-30 over to March: refuse days the month does not have.
  if (new Date(wallClock).getUTCDate() !== day) return undefined;
  let offsetMinutes = defaultOffsetMinutes;
  if (zone !== undefined && zone.toUpperCase() !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    const offsetHours = Number(digits.slice(0, 2));
    const offsetMins = Number(digits.slice(2, 4));
    if (offsetMins > 59) return undefined;
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMins);
    if (Math.abs(offsetMinutes) > MAX_OFFSET_MINUTES) return undefined;
  } else if (zone !== undefined) offsetMinutes = 0;
  return { epochMs: wallClock - offsetMinutes * MINUTE_MS, offsetMinutes };
}

/** `+02:00`, `-03:30`, `+00:00` (never `Z`: the `YYYY-MM-DDTHH:mm:ss.SSSZ` pattern writes the offset out). */
export function formatOffset(offsetMinutes: number): string {
  const sign = offsetMinutes < 0 ? '-' : '+';
  const absolute = Math.abs(offsetMinutes);
  return `${sign}${String(Math.floor(absolute / 60)).padStart(2, '0')}:${String(absolute % 60).padStart(2, '0')}`;
}

/** The instant as local time in that offset: `2026-05-01T00:30:00.000+02:00` for 2026-04-30T22:30Z at +120. */
export function formatOffsetDate(epochMs: number, offsetMinutes: number): string {
  return new Date(epochMs + offsetMinutes * MINUTE_MS).toISOString().slice(0, 23) + formatOffset(offsetMinutes);
}

/** The local calendar day of the instant in that offset (`2026-05-01`), e.g. for file names. */
export function localDay(epochMs: number, offsetMinutes: number): string {
  return new Date(epochMs + offsetMinutes * MINUTE_MS).toISOString().slice(0, 10);
}
