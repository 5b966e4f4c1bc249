import { z } from 'zod';

/**
 * A tracking window (issue 32): the weekly hours, in one IANA time zone, during which a person's positions are
 * kept, with dates that replace their weekday's hours (a holiday: no hours; a Saturday shift: its hours).
 * Buildings hold no time zone, so the schedule names its own: a person is scheduled in their site's local time.
 * Pure: `isTracked` is a function of the schedule and an instant, unit-tested with hand-made timestamps.
 */
export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

const clock = z.string().regex(/^(?:[01]\d|2[0-3]):[0-5]\d$|^24:00$/, 'HH:MM, 00:00 to 24:00');
const range = z.object({ from: clock, to: clock }).strict();
type Range = z.infer<typeof range>;

const timeZone = z
  .string()
  .min(1)
  .max(64)
  .refine((name) => {
    try {
      new Intl.DateTimeFormat('en', { timeZone: name });
      return true;
    } catch {
      return false;
    }
  }, 'not a known IANA time zone');

export const trackingScheduleSchema = z
  .object({
    time_zone: timeZone.describe('IANA time zone the hours are in, e.g. Europe/Paris'),
    weekly: z
      .array(z.object({ day: z.enum(WEEKDAYS), from: clock, to: clock }).strict())
      .max(7 * 24)
      .describe('Tracked hours per weekday; `to` is exclusive and after `from` (24:00 ends the day)'),
    exceptions: z
      .array(z.object({ date: z.iso.date(), ranges: z.array(range).max(24) }).strict())
      .max(366)
      .default([])
      .describe('Dates whose hours replace their weekday’s: no ranges means not tracked that day'),
  })
  .strict()
  .superRefine((schedule, context) => {
    const problem = (path: (string | number)[], message: string) => context.addIssue({ code: 'custom', path, message });
    const byDay = new Map<string, { range: Range; path: (string | number)[] }[]>();
    schedule.weekly.forEach((entry, index) => {
      const list = byDay.get(entry.day) ?? [];
      list.push({ range: entry, path: ['weekly', index] });
      byDay.set(entry.day, list);
    });
    const dates = new Set<string>();
    schedule.exceptions.forEach((exception, index) => {
      if (dates.has(exception.date)) problem(['exceptions', index, 'date'], `${exception.date} is listed twice`);
      dates.add(exception.date);
      byDay.set(
        `exception ${index}`,
        exception.ranges.map((entry, rangeIndex) => ({ range: entry, path: ['exceptions', index, 'ranges', rangeIndex] })),
      );
    });
    for (const ranges of byDay.values()) {
      for (const { range: entry, path } of ranges)
        if (minutes(entry.to) <= minutes(entry.from)) problem([...path, 'to'], 'must be after from');
      const sorted = [...ranges].sort((a, b) => minutes(a.range.from) - minutes(b.range.from));
      for (let index = 1; index < sorted.length; index++) {
        const previous = sorted[index - 1]!;
        if (minutes(sorted[index]!.range.from) < minutes(previous.range.to)) {
          problem(sorted[index]!.path, `overlaps ${previous.range.from}-${previous.range.to} of the same day`);
        }
      }
    }
  });

export type TrackingSchedule = z.output<typeof trackingScheduleSchema>;

const minutes = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));

const formats = new Map<string, Intl.DateTimeFormat>();
function localFormat(timeZone: string): Intl.DateTimeFormat {
  let format = formats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      weekday: 'short',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
    });
    formats.set(timeZone, format);
  }
  return format;
}

/** The local date (YYYY-MM-DD), weekday and minute of the day of an instant in a time zone. */
export function localTime(epochMs: number, timeZone: string): { date: string; day: Weekday; minute: number } {
  const parts: Record<string, string> = {};
  for (const part of localFormat(timeZone).formatToParts(epochMs)) parts[part.type] = part.value;
  return {
    date: `${parts.year}-${parts.month}-${parts.day}`,
    day: parts.weekday!.toLowerCase().slice(0, 3) as Weekday,
    minute: Number(parts.hour) * 60 + Number(parts.minute),
  };
}

/** Whether a position taken at `epochMs` falls inside the schedule (no schedule: always). */
export function isTracked(schedule: TrackingSchedule | null | undefined, epochMs: number): boolean {
  if (!schedule) return true;
  const local = localTime(epochMs, schedule.time_zone);
  const exception = schedule.exceptions.find((entry) => entry.date === local.date);
  const ranges: readonly Range[] = exception ? exception.ranges : schedule.weekly.filter((entry) => entry.day === local.day);
  return ranges.some((entry) => local.minute >= minutes(entry.from) && local.minute < minutes(entry.to));
}
