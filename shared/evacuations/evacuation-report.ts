import { z } from 'zod';
import { csvRow } from '../csv/csv.js';
import { NotFoundError, ValidationError, fieldErrors } from '../errors.js';
import type { JobLimits } from '../jobs/job-queue.js';
import { packRendered, type RenderedReport, type ReportRendering } from '../reports/report-output.js';
import { inBoundedTransaction, sqlOf } from '../reports/report-sql.js';
import { countRoll, type RollStatus, rollCountsSchema } from './roll-counts.js';
import type { Storage } from '../storage/storage.js';

/**
 * The report of one evacuation (issue 31), built from its stored roll after (or during) it: the timeline, how
 * long it took to account for 50%, 90% and 100% of the people on the roll, the arrivals at each assembly point,
 * who was marked safe by hand (by whom, with what comment), who was accounted last and who never was. It runs as
 * a job (`evacuation-report`) on the workers, as the analytics reports do, and hands back its answer written as
 * JSON or CSV (the timeline) like them (report-output.ts).
 *
 * Accounted: `safe` (reached an assembly point: the time is the fix that showed it there), `safe_manual` (the
 * time a warden marked it) and `left_site` (outside the building at the declaration: its time). People who came
 * in during the evacuation (`arrival`) are listed in the timeline but are not on the roll and count in no share.
 * The roll keeps each person's present status, so a person who was `left_site` and later reached a point shows
 * in the timeline once, at the point.
 */

export const EVACUATION_REPORT_JOB = 'evacuation-report';
export const MILESTONES = [50, 90, 100] as const;

export const evacuationReportJobSchema = z.object({
  organizationId: z.string().min(1),
  buildingId: z.number().int(),
  evacuationId: z.uuid(),
  render: z.object({ format: z.enum(['json', 'csv']), deflate: z.boolean() }),
});
export type EvacuationReportJob = z.infer<typeof evacuationReportJobSchema>;

const actor = z.object({ user_id: z.string(), email: z.string() });
const point = z.object({ id: z.string(), name: z.string() });
const at = z.string().describe('An ISO 8601 instant');
const afterS = z.number().describe('Seconds since the declaration');

const timelineRow = z.object({
  at,
  after_s: afterS,
  event: z
    .enum(['started', 'safe', 'safe_manual', 'left_site', 'arrival', 'not_found', 'ended'])
    .describe('started / ended; a person accounted (safe, safe_manual, left_site), never found (not_found), or come in (arrival)'),
  entry: z.string().nullable(),
  user_id: z.string().nullable(),
  device_ids: z.array(z.string()),
  assembly_point: point.nullable(),
  marked_by: actor.nullable(),
  comment: z.string().nullable(),
  accounted: z.number().int().describe('People on the roll accounted for once this row happened'),
  accounted_pct: z.number().describe('The same as a share of the roll, in %'),
  milestone_pct: z.number().int().nullable().describe('50, 90 or 100 on the row that brought the share to it'),
});
export type TimelineRow = z.infer<typeof timelineRow>;

export const evacuationReportSchema = z.object({
  evacuation: z.object({
    id: z.uuid(),
    building_id: z.number().int(),
    floor_ids: z.array(z.number().int()).nullable(),
    note: z.string().nullable(),
    drill: z.boolean(),
    active: z.boolean(),
    started_at: at,
    started_by: actor,
    ended_at: at.nullable(),
    ended_by: actor.nullable(),
  }),
  duration_s: afterS.describe('From the declaration to its end (an active one: to the report)'),
  counts: rollCountsSchema.extend({ accounted: z.number().int() }),
  milestones: z
    .array(
      z.object({
        percent: z.number().int(),
        accounted: z.number().int().describe('People that share is'),
        reached_at: at.nullable().describe('null: not reached'),
        after_s: afterS.nullable(),
      }),
    )
    .describe('Time to account for 50%, 90% and 100% of the roll; null when nobody is on it'),
  assembly_points: z
    .array(
      point.extend({
        arrivals: z.number().int(),
        first_at: at.nullable(),
        first_after_s: afterS.nullable(),
        last_at: at.nullable(),
        last_after_s: afterS.nullable(),
      }),
    )
    .describe("Each of the building's assembly points (and any the roll names that is one no more), by name"),
  marked_by_hand: z
    .array(
      z.object({
        entry: z.string(),
        user_id: z.string().nullable(),
        device_ids: z.array(z.string()),
        at,
        after_s: afterS,
        marked_by: actor.nullable(),
        comment: z.string().nullable(),
      }),
    )
    .describe('Who a warden marked safe, in order'),
  last_accounted: timelineRow.nullable().describe('The last person accounted for'),
  not_accounted: z
    .array(
      z.object({
        entry: z.string(),
        user_id: z.string().nullable(),
        device_ids: z.array(z.string()),
        status: z.enum(['missing', 'not_found']),
        last_position: z
          .object({ floor_id: z.number().int().nullable(), x: z.number().nullable(), y: z.number().nullable(), fix_at: at })
          .nullable(),
      }),
    )
    .describe('Never accounted: still missing, or not found when it ended'),
  timeline: z.array(timelineRow),
});
export type EvacuationReport = z.infer<typeof evacuationReportSchema>;

/** The columns of the CSV, the timeline: device ids space-separated, the point and the warden flattened. */
export const TIMELINE_CSV_COLUMNS = [
  'at',
  'after_s',
  'event',
  'entry',
  'user_id',
  'device_ids',
  'assembly_point_id',
  'assembly_point_name',
  'marked_by',
  'comment',
  'accounted',
  'accounted_pct',
  'milestone_pct',
] as const;

type Actor = z.infer<typeof actor>;

/** An evacuation as the report reads it. Times in epoch ms. */
export interface ReportedEvacuation {
  id: string;
  buildingId: number;
  floorIds: number[] | null;
  note: string | null;
  drill: boolean;
  startedAt: number;
  startedBy: Actor;
  endedAt: number | null;
  endedBy: Actor | null;
}

/** A roll entry as the report reads it. */
export interface ReportedEntry {
  personKey: string;
  userId: string | null;
  deviceIds: string[];
  arrival: boolean;
  status: RollStatus;
  statusAt: number;
  point: { id: string; name: string } | null;
  markedBy: Actor | null;
  comment: string | null;
  fix: { floorId: number | null; x: number | null; y: number | null; at: number } | null;
  seq: number;
}

const ACCOUNTED = new Set(['safe', 'safe_manual', 'left_site']);
const iso = (ms: number) => new Date(ms).toISOString();
const round = (value: number, places: number) => Math.round(value * 10 ** places) / 10 ** places;

/**
 * The report, as a pure function of the evacuation, its roll, its building's assembly points and the time it is
 * made (`now`: an active evacuation's duration runs to it). Accounted people are ordered by their time, then by
 * the order the roll changed (seq); the k-th of n reaches p% when k = ceil(p * n / 100).
 */
export function buildEvacuationReport(
  evacuation: ReportedEvacuation,
  entries: readonly ReportedEntry[],
  points: readonly { id: string; name: string }[],
  now: number,
): EvacuationReport {
  const started = evacuation.startedAt;
  const after = (ms: number) => round(Math.max(0, ms - started) / 1000, 3);
  const onRoll = entries.filter((entry) => !entry.arrival);
  const total = onRoll.length;
  const byTime = (a: ReportedEntry, b: ReportedEntry) => a.statusAt - b.statusAt || a.seq - b.seq;
  const accounted = onRoll.filter((entry) => ACCOUNTED.has(entry.status)).sort(byTime);
  const needed = new Map(MILESTONES.map((percent) => [percent, Math.ceil((percent * total) / 100)]));

  const row = (entry: ReportedEntry, event: TimelineRow['event'], count: number, milestone: number | null): TimelineRow => ({
    at: iso(entry.statusAt),
    after_s: after(entry.statusAt),
    event,
    entry: entry.personKey,
    user_id: entry.userId,
    device_ids: entry.deviceIds,
    assembly_point: entry.status === 'safe' ? entry.point : null,
    marked_by: entry.markedBy,
    comment: entry.comment,
    accounted: count,
    accounted_pct: total === 0 ? 0 : round((count * 100) / total, 2),
    milestone_pct: milestone,
  });
  const accountedRows = accounted.map((entry, index) => {
    const milestone = MILESTONES.filter((percent) => needed.get(percent) === index + 1).at(-1) ?? null;
    return row(entry, entry.status as TimelineRow['event'], index + 1, milestone);
  });
  const endRow = (event: 'started' | 'ended', ms: number, by: Actor | null, count: number): TimelineRow => ({
    at: iso(ms),
    after_s: after(ms),
    event,
    entry: null,
    user_id: null,
    device_ids: [],
    assembly_point: null,
    marked_by: by,
    comment: event === 'started' ? evacuation.note : null,
    accounted: count,
    accounted_pct: total === 0 ? 0 : round((count * 100) / total, 2),
    milestone_pct: null,
  });
  // The other rows carry the accounted count of the moment they happened at.
  const countAt = (ms: number) => accounted.filter((entry) => entry.statusAt <= ms).length;
  const others = entries
    .filter((entry) => entry.arrival || entry.status === 'not_found')
    .sort(byTime)
    .map((entry) => row(entry, entry.arrival ? 'arrival' : 'not_found', countAt(entry.statusAt), null));
  const timeline = [...accountedRows, ...others].sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  timeline.unshift(endRow('started', started, evacuation.startedBy, 0));
  if (evacuation.endedAt !== null) timeline.push(endRow('ended', evacuation.endedAt, evacuation.endedBy, accounted.length));

  const safe = onRoll.filter((entry) => entry.status === 'safe' && entry.point).sort(byTime);
  const named = new Map(points.map((p) => [p.id, p.name]));
  for (const entry of safe) if (!named.has(entry.point!.id)) named.set(entry.point!.id, entry.point!.name);
  const assemblyPoints = [...named]
    .map(([id, name]) => {
      const there = safe.filter((entry) => entry.point!.id === id);
      const [first, last] = [there[0], there.at(-1)];
      return {
        id,
        name,
        arrivals: there.length,
        first_at: first ? iso(first.statusAt) : null,
        first_after_s: first ? after(first.statusAt) : null,
        last_at: last ? iso(last.statusAt) : null,
        last_after_s: last ? after(last.statusAt) : null,
      };
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : 1));

  return {
    evacuation: {
      id: evacuation.id,
      building_id: evacuation.buildingId,
      floor_ids: evacuation.floorIds,
      note: evacuation.note,
      drill: evacuation.drill,
      active: evacuation.endedAt === null,
      started_at: iso(started),
      started_by: evacuation.startedBy,
      ended_at: evacuation.endedAt === null ? null : iso(evacuation.endedAt),
      ended_by: evacuation.endedBy,
    },
    duration_s: after(evacuation.endedAt ?? now),
    counts: { ...countRoll(entries), accounted: accounted.length },
    milestones: MILESTONES.map((percent) => {
      const k = needed.get(percent)!;
      const reached = total > 0 ? accounted[k - 1] : undefined;
      return {
        percent,
        accounted: k,
        reached_at: reached ? iso(reached.statusAt) : null,
        after_s: reached ? after(reached.statusAt) : null,
      };
    }),
    assembly_points: assemblyPoints,
    marked_by_hand: entries
      .filter((entry) => entry.status === 'safe_manual')
      .sort(byTime)
      .map((entry) => ({
        entry: entry.personKey,
        user_id: entry.userId,
        device_ids: entry.deviceIds,
        at: iso(entry.statusAt),
        after_s: after(entry.statusAt),
        marked_by: entry.markedBy,
        comment: entry.comment,
      })),
    last_accounted: accountedRows.at(-1) ?? null,
    not_accounted: onRoll
      .filter((entry) => entry.status === 'missing' || entry.status === 'not_found')
      .sort((a, b) => (a.personKey < b.personKey ? -1 : 1))
      .map((entry) => ({
        entry: entry.personKey,
        user_id: entry.userId,
        device_ids: entry.deviceIds,
        status: entry.status as 'missing' | 'not_found',
        last_position: entry.fix ? { floor_id: entry.fix.floorId, x: entry.fix.x, y: entry.fix.y, fix_at: iso(entry.fix.at) } : null,
      })),
    timeline,
  };
}

/** The CSV: the timeline, one row per event. */
export function evacuationReportCsv(report: EvacuationReport): string {
  let text = csvRow(TIMELINE_CSV_COLUMNS);
  for (const row of report.timeline) {
    text += csvRow([
      row.at,
      row.after_s,
      row.event,
      row.entry,
      row.user_id,
      row.device_ids.join(' '),
      row.assembly_point?.id,
      row.assembly_point?.name,
      row.marked_by?.email,
      row.comment,
      row.accounted,
      row.accounted_pct,
      row.milestone_pct,
    ]);
  }
  return text;
}

const json = <T>(value: unknown): T => (typeof value === 'string' ? JSON.parse(value) : value) as T;
const ms = (value: Date | string) => new Date(value).getTime();

/**
 * The processor of an `evacuation-report` job: reads the evacuation of the job's organization and building, its
 * roll and the building's assembly points in one transaction bounded by the job's limits, and writes the answer.
 * 404 when there is no such evacuation (ended and deleted with its building meanwhile).
 */
export async function runEvacuationReport(storage: Storage, data: unknown, limits: JobLimits): Promise<RenderedReport> {
  const started = performance.now();
  const parsed = evacuationReportJobSchema.safeParse(data);
  if (!parsed.success) throw new ValidationError(fieldErrors(parsed.error));
  const job = parsed.data;
  const { evacuation, entries, points } = await inBoundedTransaction(storage, limits, async (execute) => {
    const [row] = await execute<Record<string, unknown>>(
      sqlOf(
        'select * from evacuations where organization_id = ? and building_id = ? and id = ?',
        job.organizationId,
        job.buildingId,
        job.evacuationId,
      ),
    );
    if (!row) return { evacuation: undefined, entries: [], points: [] };
    const rows = await execute<Record<string, unknown>>(
      sqlOf(
        `select person_key, user_id, device_ids, arrival, status, status_at, point_id, point_name, marked_by, comment,
           floor_id, x, y, fix_at, seq from evacuation_roll where evacuation_id = ?`,
        job.evacuationId,
      ),
    );
    const musterPoints = await execute<{ id: string; name: string }>(
      sqlOf(
        'select id, name from geofences where organization_id = ? and building_id = ? and muster_point and not deleted',
        job.organizationId,
        job.buildingId,
      ),
    );
    return { evacuation: row, entries: rows, points: musterPoints };
  });
  if (!evacuation) throw new NotFoundError('Evacuation');
  const report = buildEvacuationReport(
    {
      id: String(evacuation.id),
      buildingId: Number(evacuation.building_id),
      floorIds: json<number[] | null>(evacuation.floor_ids),
      note: evacuation.note as string | null,
      drill: Boolean(evacuation.drill),
      startedAt: ms(evacuation.started_at as string),
      startedBy: json<Actor>(evacuation.started_by),
      endedAt: evacuation.ended_at === null ? null : ms(evacuation.ended_at as string),
      endedBy: json<Actor | null>(evacuation.ended_by),
    },
    entries.map((row) => ({
      personKey: String(row.person_key),
      userId: (row.user_id as string | null) ?? null,
      deviceIds: json<string[]>(row.device_ids),
      arrival: Boolean(row.arrival),
      status: row.status as ReportedEntry['status'],
      statusAt: ms(row.status_at as string),
      point: row.point_id ? { id: String(row.point_id), name: String(row.point_name ?? '') } : null,
      markedBy: json<Actor | null>(row.marked_by),
      comment: (row.comment as string | null) ?? null,
      fix:
        row.fix_at === null
          ? null
          : {
              floorId: row.floor_id === null ? null : Number(row.floor_id),
              x: row.x as number | null,
              y: row.y as number | null,
              at: ms(row.fix_at as string),
            },
      seq: Number(row.seq),
    })),
    points,
    Date.now(),
  );
  const text = job.render.format === 'json' ? JSON.stringify(report) : evacuationReportCsv(report);
  const statistics = {
    rows_read: entries.length,
    rows_returned: report.timeline.length,
    elapsed_ms: round(performance.now() - started, 2),
  };
  return packRendered(text, job.render as ReportRendering, statistics);
}
