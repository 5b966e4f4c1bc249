import { z } from 'zod';
import { parseOffsetDate, type OffsetDate } from '../../shared/time/offset-date.js';

/** The spec: "GMT+2 is used when none is sent" (a fixed offset, summer or winter). */
export const DEFAULT_OFFSET_MINUTES = 120;
export const MAX_RANGE_DAYS = 31;
const DAY_MS = 24 * 3600 * 1000;

/** What the history endpoints read: [from, to) and the offset their times are written in. */
export interface HistoryWindow {
  from: number;
  to: number;
  /** The offset `date` was sent in (default +02:00): every `time_sec` is written in it. */
  offsetMinutes: number;
  deviceId?: string;
  /** Device identifiers written as pseudonyms of this answer alone (shared/reports/pseudonymize.ts). */
  pseudonymize?: boolean;
}

const offsetDateParam = z
  .string()
  .describe('YYYY-MM-DDTHH:mm:ss.SSS±HH:MM (ISO 8601); without an offset, +02:00')
  .transform((text, context): OffsetDate => {
    const parsed = parseOffsetDate(text, DEFAULT_OFFSET_MINUTES);
    if (!parsed) {
      context.addIssue({ code: 'custom', message: 'a date and time such as 2026-05-01T00:00:00.000+02:00' });
      return z.NEVER;
    }
    return parsed;
  });

/** `date`, `date_end` and `device_id`, shared by the JSON history and the CSV export. */
export const windowQuery = {
  date: offsetDateParam.describe(
    'Start (inclusive): YYYY-MM-DDTHH:mm:ss.SSS±HH:MM; without an offset, +02:00. Times come back in this offset',
  ),
  date_end: offsetDateParam
    .optional()
    .describe(`End (exclusive), same format; default: date + 1 day (the day starting at date); at most ${MAX_RANGE_DAYS} days after date`),
  device_id: z.string().trim().min(1).max(200).optional().describe('One device identifier'),
  pseudonymize: z
    .enum(['true', 'false'])
    .optional()
    .describe('Device identifiers become pseudonyms of this answer alone (not with device_id)'),
};

/** Checks the range (date_end after date, at most 31 days) and folds the three parameters into a window. */
export function toWindow<T extends { date: OffsetDate; date_end?: OffsetDate; device_id?: string; pseudonymize?: 'true' | 'false' }>(
  query: T,
  context: z.RefinementCtx,
): HistoryWindow {
  const from = query.date.epochMs;
  const to = query.date_end?.epochMs ?? from + DAY_MS;
  if (to <= from) context.addIssue({ code: 'custom', path: ['date_end'], message: 'must be after date' });
  else if (to - from > MAX_RANGE_DAYS * DAY_MS)
    context.addIssue({ code: 'custom', path: ['date_end'], message: `at most ${MAX_RANGE_DAYS} days after date` });
  return { from, to, offsetMinutes: query.date.offsetMinutes, deviceId: query.device_id, pseudonymize: query.pseudonymize === 'true' };
}
