import { describe, expect, it } from 'vitest';
import { isTracked, localTime, trackingScheduleSchema } from '../../shared/privacy/tracking-schedule.js';

/** Monday 2026-11-23 in Paris is UTC+1: 08:00 local is 07:00Z. */
const paris = trackingScheduleSchema.parse({
  time_zone: 'Europe/Paris',
  weekly: [
    { day: 'mon', from: '08:00', to: '12:00' },
    { day: 'mon', from: '13:00', to: '17:00' },
    { day: 'sat', from: '22:00', to: '24:00' },
  ],
  exceptions: [
    { date: '2026-11-30', ranges: [] },
    { date: '2026-11-29', ranges: [{ from: '10:00', to: '11:00' }] },
  ],
});
const utc = (iso: string) => Date.parse(iso);
const fieldsOf = (input: unknown) => {
  const parsed = trackingScheduleSchema.safeParse(input);
  return parsed.success ? [] : parsed.error.issues.map((issue) => issue.path.join('.'));
};

describe('tracking schedule', () => {
  it('reads instants in the schedule’s time zone, DST included', () => {
    expect(localTime(utc('2026-11-23T07:00:00Z'), 'Europe/Paris')).toEqual({ date: '2026-11-23', day: 'mon', minute: 8 * 60 });
    expect(localTime(utc('2026-07-06T06:00:00Z'), 'Europe/Paris')).toEqual({ date: '2026-07-06', day: 'mon', minute: 8 * 60 });
    expect(localTime(utc('2026-11-23T23:30:00Z'), 'Europe/Paris')).toEqual({ date: '2026-11-24', day: 'tue', minute: 30 });
  });

  it('tracks inside a range (from inclusive, to exclusive) and not in a break, after hours or on other days', () => {
    expect(isTracked(paris, utc('2026-11-23T07:00:00Z'))).toBe(true); // Mon 08:00
    expect(isTracked(paris, utc('2026-11-23T06:59:00Z'))).toBe(false); // Mon 07:59
    expect(isTracked(paris, utc('2026-11-23T11:00:00Z'))).toBe(false); // Mon 12:00, lunch
    expect(isTracked(paris, utc('2026-11-23T12:30:00Z'))).toBe(true); // Mon 13:30
    expect(isTracked(paris, utc('2026-11-23T16:00:00Z'))).toBe(false); // Mon 17:00
    expect(isTracked(paris, utc('2026-11-24T09:00:00Z'))).toBe(false); // Tue
    expect(isTracked(paris, utc('2026-11-28T22:59:00Z'))).toBe(true); // Sat 23:59, up to 24:00
  });

  it('lets a date replace its weekday: no ranges is a day off, ranges are that day’s hours', () => {
    expect(isTracked(paris, utc('2026-11-30T07:30:00Z'))).toBe(false); // Monday, day off
    expect(isTracked(paris, utc('2026-11-29T09:30:00Z'))).toBe(true); // Sunday 10:30, an extra shift
    expect(isTracked(paris, utc('2026-11-29T10:00:00Z'))).toBe(false); // Sunday 11:00
  });

  it('tracks always without a schedule', () => {
    expect(isTracked(null, 0)).toBe(true);
  });

  it('refuses overlapping ranges, an empty or reversed range, an unknown zone and a date twice, naming the field', () => {
    const base = { time_zone: 'UTC', weekly: [] };
    expect(
      fieldsOf({
        ...base,
        weekly: [
          { day: 'tue', from: '09:00', to: '12:00' },
          { day: 'tue', from: '11:00', to: '14:00' },
        ],
      }),
    ).toEqual(['weekly.1']);
    expect(
      fieldsOf({
        ...base,
        weekly: [
          { day: 'tue', from: '09:00', to: '12:00' },
          { day: 'wed', from: '11:00', to: '14:00' },
        ],
      }),
    ).toEqual([]);
    expect(fieldsOf({ ...base, weekly: [{ day: 'tue', from: '12:00', to: '12:00' }] })).toEqual(['weekly.0.to']);
    expect(
      fieldsOf({
        ...base,
        exceptions: [
          {
            date: '2026-01-01',
            ranges: [
              { from: '08:00', to: '10:00' },
              { from: '07:00', to: '09:00' },
            ],
          },
        ],
      }),
    ).toEqual(['exceptions.0.ranges.0']);
    expect(
      fieldsOf({
        ...base,
        exceptions: [
          { date: '2026-01-01', ranges: [] },
          { date: '2026-01-01', ranges: [] },
        ],
      }),
    ).toEqual(['exceptions.1.date']);
    expect(fieldsOf({ ...base, time_zone: 'Mars/Olympus' })).toEqual(['time_zone']);
    expect(fieldsOf({ ...base, weekly: [{ day: 'tue', from: '9:00', to: '25:00' }] })).toEqual(['weekly.0.from', 'weekly.0.to']);
  });
});
