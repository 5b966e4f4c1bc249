import { performance } from 'node:perf_hooks';
import type { Config } from '../config.js';
import { partitionGone, positionPartitions } from '../positions/position-partitions.js';
import type { Storage } from '../storage/index.js';
import { EMBEDDED_HOLD_MS, restAfterWork } from '../pacing.js';
import { pgArray } from '../storage/pg-array.js';

/**
 * Retention per organization (issue 32). Each kind of data has its own period, which an organization's admin may
 * shorten (never lengthen) below the deployment's maximum: POSITIONS_RETENTION_DAYS for the tracking data,
 * AUDIT_RETENTION_DAYS for the audit log. Expiry is bounded deletes of `batchSize` rows, each its own statement,
 * so no transaction holds the tables for long; positions (the one table partitioned, by day) are deleted from each
 * day partition by name, as the erasure does, never through the parent. Whole day partitions of positions past the
 * deployment's maximum are dropped by the position store (shared/positions/position-store.ts) as before.
 */
export const RETENTION_KINDS = ['positions', 'zone_events', 'stays_and_rollups', 'alarm_positions', 'audit'] as const;
export type RetentionKind = (typeof RETENTION_KINDS)[number];

/** Days per kind; null: no limit (a maximum of 0 days keeps everything), or, in an organization's settings, the maximum. */
export type RetentionDays = Record<RetentionKind, number | null>;

/** The organizations column holding each kind's period (migration m0031). */
const COLUMNS: Record<RetentionKind, string> = {
  positions: 'positions_retention_days',
  zone_events: 'zone_events_retention_days',
  stays_and_rollups: 'stays_retention_days',
  alarm_positions: 'alarm_positions_retention_days',
  audit: 'audit_retention_days',
};

/** What each kind is, as a person reading their privacy page is told. */
export const RETENTION_NOTES: Record<RetentionKind, string> = {
  positions: 'only those taken inside the tracking window (and alarm-button presses)',
  zone_events: 'geofence enters and exits',
  stays_and_rollups: 'time spent in geofences and the report summaries built from positions',
  alarm_positions: 'where a closed alarm was raised; the alarm itself is kept for the safety record',
  audit: 'what the person changed',
};

/** The deployment's maximum per kind. */
export function retentionMaxima(config: Pick<Config, 'POSITIONS_RETENTION_DAYS' | 'AUDIT_RETENTION_DAYS'>): RetentionDays {
  const tracking = config.POSITIONS_RETENTION_DAYS || null;
  return {
    positions: tracking,
    zone_events: tracking,
    stays_and_rollups: tracking,
    alarm_positions: tracking,
    audit: (config.AUDIT_RETENTION_DAYS ?? config.POSITIONS_RETENTION_DAYS) || null,
  };
}

/** The period in force: the organization's own where it set one, else the deployment's maximum. */
export function effectiveRetention(own: RetentionDays, maxima: RetentionDays): RetentionDays {
  const effective = {} as RetentionDays;
  for (const kind of RETENTION_KINDS) effective[kind] = own[kind] ?? maxima[kind];
  return effective;
}

export const RETENTION_SELECT = RETENTION_KINDS.map((kind) => `${COLUMNS[kind]} as ${kind}`).join(', ');

/** An organizations row read with RETENTION_SELECT, as RetentionDays. */
export function retentionOf(row: Record<string, unknown>): RetentionDays {
  const days = {} as RetentionDays;
  for (const kind of RETENTION_KINDS) days[kind] = row[kind] === null || row[kind] === undefined ? null : Number(row[kind]);
  return days;
}

/** `update organizations set ...` for the kinds given (null: back to the maximum); the parameters follow `set`. */
export function retentionUpdate(changes: Partial<RetentionDays>): { set: string; params: (number | null)[] } {
  const kinds = RETENTION_KINDS.filter((kind) => changes[kind] !== undefined);
  return { set: kinds.map((kind) => `${COLUMNS[kind]} = ?`).join(', '), params: kinds.map((kind) => changes[kind] ?? null) };
}

type Execute = Pick<Storage, 'execute' | 'kind'>;

/**
 * How expiry and erasure share the machine with ingest. Each batch is its own statement, sized from the last one's
 * time, and after each the sweep rests as shared/pacing.ts says: at least as long as it worked, then on while the
 * gateway's thread is busy with other work, down to a twentieth of the time. With the gateway otherwise idle a
 * sweep takes half the time; under a flood of uploads that keeps the thread busy, a twentieth, so a large erasure
 * then takes longer rather than slowing uploads. Resting only as long as it worked, whatever the load, an erasure
 * beside uploads that kept the thread busy took up to 44% of their rate and up to doubled their median
 * (bench/README.md, erasure). The thread's load is the signal on both drivers: on embedded storage PGlite runs in
 * that thread, and on a server the database shares the machine's cores (with a busy thread, resting as long as it
 * worked cost the others' uploads 40% of their rate there too).
 *
 * Statements are sized to about EMBEDDED_HOLD_MS on embedded storage, where an upload waits for the statement in
 * hand (shared/pacing.ts). On a server an upload does not wait for them, and each has a floor of
 * a round trip and a commit (7-20 ms on the loaded bench host): sized towards 5 ms there, batches fell to the
 * minimum of 50 rows and the erasure crawled at 800-1,300 rows/s, so there they are sized to SERVER_STATEMENT_MS.
 */
const SERVER_STATEMENT_MS = 50;
const MIN_BATCH = 50;

/**
 * Runs `batch` until it says it is done, each call its own statement (and transaction) of at most `maxBatch` rows,
 * paced as above so uploads are served meanwhile. `batch` gets the size to use and answers how many rows it
 * handled and whether any are left. Returns how many rows were handled.
 */
export async function inPacedBatches(
  storage: Pick<Storage, 'kind'>,
  maxBatch: number,
  batch: (size: number) => Promise<{ count: number; more: boolean }>,
  afterBatch?: (count: number) => Promise<void>,
): Promise<number> {
  let total = 0;
  let size = Math.min(maxBatch, 500);
  for (;;) {
    const started = performance.now();
    const { count, more } = await batch(size);
    total += count;
    await afterBatch?.(count);
    // The batch and what follows it (the erasure saves its progress): all of it is the sweep's.
    const took = performance.now() - started;
    if (!more) return total;
    // Towards the statement time, at most doubling: the rows a statement meets vary (a page range may be all the person's).
    const target = storage.kind === 'embedded' ? EMBEDDED_HOLD_MS : SERVER_STATEMENT_MS;
    const next = Math.min(size * 2, Math.round((size * target) / Math.max(took, 1)));
    size = Math.max(Math.min(MIN_BATCH, maxBatch), Math.min(maxBatch, next));
    await restAfterWork(took);
  }
}

/** Deletes the rows of `table` that `where` selects, in paced batches (`inPacedBatches`). Returns how many went. */
export function deleteInBatches(
  storage: Execute,
  table: string,
  where: string,
  params: readonly unknown[],
  maxBatch: number,
  afterBatch?: (count: number) => Promise<void>,
): Promise<number> {
  return inPacedBatches(
    storage,
    maxBatch,
    async (size) => {
      const [gone] = await storage.execute<{ n: number }>(
        `with gone as (delete from ${table} where (tableoid, ctid) in (select tableoid, ctid from ${table} where ${where} limit ${size}) returning 1)
         select count(*)::int as n from gone`,
        [...params],
      );
      const count = Number(gone?.n ?? 0);
      return { count, more: count === size };
    },
    afterBatch,
  );
}

/**
 * Tables expired by instant, per kind (alarm positions are cleared, not deleted: see `clearAlarmPositions`).
 * `partitioned`: partitioned by day on `time` (migration m0005, the only one), expired partition by partition.
 */
const EXPIRED_TABLES: Record<Exclude<RetentionKind, 'alarm_positions'>, { table: string; time: string; partitioned?: true }[]> = {
  positions: [{ table: 'positions', time: 'ts', partitioned: true }],
  zone_events: [{ table: 'zone_events', time: 'at' }],
  stays_and_rollups: [
    { table: 'geofence_stays', time: 'hour' },
    { table: 'rollup_runs', time: 'quarter' },
    { table: 'rollup_heat_cells', time: 'hour' },
  ],
  audit: [{ table: 'audit_log', time: 'at' }],
};

/**
 * The place of an organization's closed alarms raised before `cutoff` goes (in the alarm and in its event history);
 * the alarm, its kind, person and states stay. An alarm still being handled keeps its place: someone may still be
 * on their way. Bounded like the deletes. Returns how many alarms lost their place.
 */
export async function clearAlarmPositions(storage: Execute, organizationId: string, cutoff: Date, batchSize: number): Promise<number> {
  let total = 0;
  for (;;) {
    const cleared = await storage.execute<{ id: string }>(
      `with picked as (
         select id from alarms where organization_id = ? and created_at < ? and state in ('CLOSED', 'MARKED_FALSE')
           and (floor_id is not null or x is not null or lat is not null or details->'position' is not null) limit ${batchSize} for update skip locked)
       update alarms a set floor_id = null, x = null, y = null, lat = null, lng = null, details = a.details - 'position', updated_at = now()
       from picked p where a.id = p.id returning a.id`,
      [organizationId, cutoff],
    );
    if (cleared.length > 0) {
      await storage.execute(
        `update alarm_events set alarm = alarm || jsonb_build_object('floor_id', null, 'position', null)
         where organization_id = ? and alarm_id = any(?::uuid[])`,
        [organizationId, pgArray(cleared.map((row) => row.id))],
      );
    }
    total += cleared.length;
    if (cleared.length < batchSize) return total;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * Positions before `cutoff` that `where` selects, day partition by day partition (oldest first), each in paced
 * batches that name their partition, as the erasure's do: a statement on the parent is planned over every partition
 * its bounds do not exclude (every day older than the cutoff), which past a few weeks costs more than the batch
 * itself (bench/README.md, erasure), with ingest waiting on embedded storage. A day starting at or after the cutoff
 * holds nothing to expire and is not visited. A partition dropped meanwhile (past the deployment's maximum, by the
 * position store) is passed over. Returns how many rows went.
 */
async function expirePositions(
  storage: Execute,
  where: string,
  params: readonly unknown[],
  cutoff: Date,
  batchSize: number,
): Promise<number> {
  let total = 0;
  const counted = async (count: number) => {
    total += count;
  };
  for (const { name, day } of await positionPartitions(storage)) {
    if (day !== null && day >= cutoff.getTime()) continue;
    try {
      await deleteInBatches(storage, name, where, params, batchSize, counted);
    } catch (error) {
      if (!(await partitionGone(storage, name))) throw error;
    }
  }
  return total;
}

export type RetentionCounts = Partial<Record<string, number>>;

/** Expires one organization's data past each period in `days` (null: nothing of that kind expires). */
export async function expireOrganization(
  storage: Execute,
  organizationId: string,
  days: RetentionDays,
  now: number,
  batchSize: number,
): Promise<RetentionCounts> {
  const counts: RetentionCounts = {};
  const cutoffOf = (kind: RetentionKind) => (days[kind] === null ? null : new Date(now - days[kind]! * 86_400_000));
  for (const kind of RETENTION_KINDS) {
    const cutoff = cutoffOf(kind);
    if (cutoff === null) continue;
    if (kind === 'alarm_positions') {
      counts.alarm_positions = await clearAlarmPositions(storage, organizationId, cutoff, batchSize);
      continue;
    }
    for (const { table, time, partitioned } of EXPIRED_TABLES[kind]) {
      const where = `organization_id = ? and ${time} < ?`;
      counts[table] = partitioned
        ? await expirePositions(storage, where, [organizationId, cutoff], cutoff, batchSize)
        : await deleteInBatches(storage, table, where, [organizationId, cutoff], batchSize);
    }
  }
  return counts;
}

/**
 * One retention pass over every organization: each kind past its organization's period (or the deployment's
 * maximum) goes, in bounded batches. Returns what went, per organization that lost anything.
 */
export async function expireAll(
  storage: Execute,
  maxima: RetentionDays,
  now = Date.now(),
  batchSize = 5000,
): Promise<Map<string, RetentionCounts>> {
  const rows = await storage.execute<Record<string, unknown> & { id: string }>(`select id, ${RETENTION_SELECT} from organizations`);
  const expired = new Map<string, RetentionCounts>();
  for (const row of rows) {
    const counts = await expireOrganization(storage, row.id, effectiveRetention(retentionOf(row), maxima), now, batchSize);
    if (Object.values(counts).some((count) => (count ?? 0) > 0)) expired.set(row.id, counts);
  }
  return expired;
}
