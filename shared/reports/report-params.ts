import { z } from 'zod';
import { booleanParam, listParam } from '../query-params.js';
import type { ReportRendering } from './report-output.js';

/**
 * Report parameters (spec 4.4). Arrays arrive comma separated (`a=1,2`) or as `a[]=1&a[]=2`; an empty list is
 * refused. Dates are ISO 8601 instants; `time_zone` is an IANA name, UTC by default.
 */
const instant = z.iso
  .datetime({ offset: true, message: 'an ISO 8601 date-time such as 2026-05-01T00:00:00Z' })
  .transform((value) => new Date(value).toISOString());
const seconds = z.coerce.number().min(0);

export const timeZone = z
  .string()
  .default('UTC')
  .refine((name) => {
    try {
      new Intl.DateTimeFormat('en', { timeZone: name });
      return true;
    } catch {
      return false;
    }
  }, 'an IANA time zone such as Europe/Madrid');

const window = {
  from_date: instant,
  to_date: instant,
  time_zone: timeZone,
  pseudonymize: booleanParam
    .default(false)
    .describe(
      'User and device ids become pseudonyms of this report alone; place-based reports drop cells of fewer than REPORTS_PSEUDONYMOUS_MIN_PEOPLE people',
    ),
};

/** Filters naming a person or a device: a pseudonymous report cannot be asked about someone named (422). */
export const IDENTITY_FILTERS = ['user_id', 'user_ids', 'device_id', 'device_ids'] as const;

const geofencing = {
  organization_id: z.uuid().optional(),
  building_ids: listParam(z.coerce.number().int().positive()).optional(),
  device_ids: listParam(z.string()).optional(),
  user_ids: listParam(z.uuid()).optional(),
  fence_ids: listParam(z.uuid()).optional(),
  only_assigned: booleanParam.default(false),
  min_stay_time: seconds.optional(),
  max_stay_time: seconds.optional(),
  session_threshold: seconds.default(15),
  ...window,
};

export const reportParamSchemas = {
  geofencing_stay_time: z.object({ ...geofencing, group: z.enum(['day', 'hour']).default('day') }),
  geofencing_sessions_matches: z.object(geofencing),
  visitors: z.object({
    building_id: z.coerce.number().int().positive(),
    floor_id: z.coerce.number().int().positive().optional(),
    group: z.enum(['month', 'day', 'hour']).default('day'),
    ...window,
  }),
  positioning_time: z.object({
    building_id: z.coerce.number().int().positive(),
    floor_id: z.coerce.number().int().positive().optional(),
    group: z.enum(['month', 'day', 'hour', 'day_of_week']).default('day_of_week'),
    session_threshold: seconds.default(15),
    ...window,
  }),
  heatmap: z.object({
    building_id: z.coerce.number().int().positive(),
    floor_id: z.coerce.number().int().positive(),
    device_id: z.string().optional(),
    user_id: z.uuid().optional(),
    position_type: z.enum(['indoor', 'outdoor']).optional(),
    ...window,
  }),
  raw_data: z.object({
    organization_id: z.uuid().optional(),
    building_ids: listParam(z.coerce.number().int().positive()).optional(),
    floor_ids: listParam(z.coerce.number().int().positive()).optional(),
    device_ids: listParam(z.string()).optional(),
    user_ids: listParam(z.string()).optional(),
    order_by: listParam(z.enum(['timestamp', 'device_id', 'user_id', 'building_id', 'floor_id'])).optional(),
    order_direction: z.enum(['asc', 'desc']).default('asc'),
    position_type: z.enum(['indoor', 'outdoor']).optional(),
    limit: z.coerce.number().int().min(1).max(100_000).default(10_000),
    ...window,
  }),
  user_positions: z.object({
    building_id: z.coerce.number().int().positive().optional(),
    user_id: z.uuid().optional(),
    device_id: z.string().optional(),
    session_threshold: seconds.default(15),
    ...window,
  }),
} as const;

/**
 * A report's window spans at most `maxDays`: the cost of a report grows with its window, and an unbounded one
 * would hold a database connection (on embedded storage, the only one) for as long as it takes. Problems name
 * the field, as the parameter checks do; a backwards window is the report's own to refuse.
 */
export function windowProblems(params: { from_date: string; to_date: string }, maxDays: number): { field: string; message: string }[] {
  const span = Date.parse(params.to_date) - Date.parse(params.from_date);
  if (span > maxDays * 86_400_000)
    return [{ field: 'query.to_date', message: `at most ${maxDays} days after from_date (REPORTS_MAX_WINDOW_DAYS)` }];
  return [];
}

export type ReportName = keyof typeof reportParamSchemas;
export const REPORT_NAMES = Object.keys(reportParamSchemas) as ReportName[];

/** Who asks: the organization, and for a plain user, the only user whose positions they may see. */
export interface ReportScope {
  organizationId: string;
  onlyUserId?: string;
}

export interface ReportJob {
  report: ReportName;
  params: Record<string, unknown>;
  scope: ReportScope;
  /** Hand back the answer written (report-output.ts), not the rows; absent from a gateway before this. */
  render?: ReportRendering;
  /**
   * Pseudonymous (pseudonymize.ts) whatever the parameters say, because the organization forces it for the caller;
   * and the minimum group size of place-based cells (the gateway's REPORTS_PSEUDONYMOUS_MIN_PEOPLE).
   */
  pseudonymous?: { forced: boolean; minPeople: number };
}

export interface ReportColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'datetime';
  nullable: boolean;
}

export interface ReportResult {
  meta: ReportColumn[];
  rows: unknown[][];
  statistics: { rows_read: number; rows_returned: number; elapsed_ms: number };
}
