import { randomUUID } from 'node:crypto';
import type { JobRequest } from '../jobs/index.js';
import { positionPartitions } from '../positions/position-partitions.js';
import type { Storage } from '../storage/index.js';
import { pgArray } from '../storage/pg-array.js';
import { deleteInBatches, inPacedBatches } from './retention.js';

/**
 * Erasure of one person's history (issue 32): their positions, zone events, stays and rollup rows (a rollup row
 * is one device-hour of one user, so deleting theirs leaves exactly what the others contribute), and the place
 * attached to their alarms and evacuation roll entries; the alarms and entries stay, pseudonymized, so the safety
 * record is complete. Runs as a job from the durable `erasure_requests` row, in batches of `batchSize` rows (never
 * one long transaction), saving what it removed after each: run again (after a restart) it carries on, and run on
 * a finished request it removes nothing.
 */
export const ERASURE_JOB = 'erasure';

/** Tables holding a person's tracking data: rows with their user id are deleted, within the range on `time`. */
const ERASED_TABLES = [
  { table: 'positions', time: 'ts' },
  { table: 'zone_events', time: 'at' },
  { table: 'geofence_stays', time: 'hour' },
  { table: 'rollup_runs', time: 'quarter' },
  { table: 'rollup_heat_cells', time: 'hour' },
] as const;

export type ErasureCounts = Partial<
  Record<(typeof ERASED_TABLES)[number]['table'] | 'alarms_pseudonymized' | 'roll_entries_pseudonymized', number>
>;

export interface ErasureRequest {
  id: string;
  organization_id: string;
  user_id: string;
  /** `request`: asked by an admin (POST .../erasure); `user_deleted`: started by deleting the user. */
  cause: 'request' | 'user_deleted';
  from: string | null;
  to: string | null;
  status: 'queued' | 'running' | 'done';
  removed: ErasureCounts;
  created_at: string;
  finished_at: string | null;
}

const SELECT_REQUEST = `select id, organization_id, user_id, cause, from_ts as "from", to_ts as "to", status, removed, created_at, finished_at
  from erasure_requests`;

export async function readErasure(
  storage: Pick<Storage, 'execute'>,
  organizationId: string,
  id: string,
): Promise<ErasureRequest | undefined> {
  const [row] = await storage.execute<ErasureRequest>(`${SELECT_REQUEST} where organization_id = ? and id = ?`, [organizationId, id]);
  return row && present(row);
}

/** A person's erasures, newest first (their own record outlives the person: it says what was erased, never the data). */
export async function listErasures(storage: Pick<Storage, 'execute'>, organizationId: string, userId: string): Promise<ErasureRequest[]> {
  const rows = await storage.execute<ErasureRequest>(
    `${SELECT_REQUEST} where organization_id = ? and user_id = ? order by created_at desc, id limit 100`,
    [organizationId, userId],
  );
  return rows.map(present);
}

/** Records an erasure in `tx` (the job is queued once it is committed: `erasureJob`). */
export async function recordErasure(
  tx: Pick<Storage, 'execute'>,
  request: { organizationId: string; userId: string; from?: string; to?: string; requestedBy: string; cause: ErasureRequest['cause'] },
): Promise<ErasureRequest> {
  const id = randomUUID();
  await tx.execute(
    `insert into erasure_requests (id, organization_id, user_id, from_ts, to_ts, status, requested_by, cause) values (?, ?, ?, ?, ?, 'queued', ?, ?)`,
    [id, request.organizationId, request.userId, request.from ?? null, request.to ?? null, request.requestedBy, request.cause],
  );
  return (await readErasure(tx, request.organizationId, id))!;
}

/**
 * Deleting a user erases them (docs/privacy.md), in the delete's transaction: their devices go with the account
 * (their identifiers name the person in every position), and their whole history is erased by the job this
 * records. Returns the erasure and the identifiers of the devices deleted.
 */
export async function eraseDeletedUser(
  tx: Pick<Storage, 'execute'>,
  organizationId: string,
  userId: string,
  requestedBy: string,
): Promise<{ erasure: ErasureRequest; devices: string[] }> {
  const devices = await tx.execute<{ identifier: string }>(
    'delete from devices where organization_id = ? and user_id = ? returning identifier',
    [organizationId, userId],
  );
  const erasure = await recordErasure(tx, { organizationId, userId, requestedBy, cause: 'user_deleted' });
  return { erasure, devices: devices.map((device) => device.identifier) };
}

export const erasureJob = (request: Pick<ErasureRequest, 'id' | 'organization_id'>): JobRequest => ({
  name: ERASURE_JOB,
  organizationId: request.organization_id,
  data: { id: request.id },
});

/** Queues every erasure not finished (the job queue holds a job at most once: a restart loses the ones in flight). */
export async function resumeErasures(storage: Pick<Storage, 'execute'>, schedule: (job: JobRequest) => Promise<void>): Promise<number> {
  const rows = await storage.execute<{ id: string; organization_id: string }>(
    `select id, organization_id from erasure_requests where status <> 'done'`,
  );
  for (const row of rows) await schedule(erasureJob(row));
  return rows.length;
}

/** Runs (or resumes) one erasure to its end; what it removed in all, over every run. */
export async function runErasure(storage: Pick<Storage, 'execute' | 'kind'>, id: string, batchSize = 5000): Promise<ErasureCounts> {
  const [row] = await storage.execute<ErasureRequest>(`${SELECT_REQUEST} where id = ?`, [id]);
  if (!row) return {};
  const request = present(row);
  if (request.status === 'done') return request.removed;
  const removed: ErasureCounts = { ...request.removed };
  const save = (status: 'running' | 'done') =>
    storage.execute(
      `update erasure_requests set status = ?, removed = ?::jsonb, updated_at = now()${status === 'done' ? ', finished_at = now()' : ''} where id = ?`,
      [status, JSON.stringify(removed), id],
    );
  await save('running');
  const range = (column: string) => `${request.from ? ` and ${column} >= ?` : ''}${request.to ? ` and ${column} <= ?` : ''}`;
  const rangeParams = [request.from, request.to].filter((value) => value !== null);
  for (const { table, time } of ERASED_TABLES) {
    // Hour and quarter buckets overlapping the range go whole: a bucket's rows cannot be split by instant.
    const bucketed = time === 'hour' || time === 'quarter';
    const from = !bucketed ? '?' : `date_bin('${time === 'hour' ? '1 hour' : '15 minutes'}', ?::timestamptz, '2000-01-01T00:00:00Z')`;
    const where = `organization_id = ? and user_id = ?${request.from ? ` and ${time} >= ${from}` : ''}${request.to ? ` and ${time} <= ?` : ''}`;
    removed[table] ??= 0;
    const counted = async (count: number) => {
      removed[table] = (removed[table] ?? 0) + count;
      await save('running');
    };
    if (table === 'positions') {
      await erasePositions(storage, where, [request.organization_id, request.user_id, ...rangeParams], batchSize, counted);
      continue;
    }
    await deleteInBatches(storage, table, where, [request.organization_id, request.user_id, ...rangeParams], batchSize, counted);
  }
  for (;;) {
    // The alarm keeps its kind, states and history; its person, device and place go. Each gets its own pseudonym,
    // so two erased alarms never collide on the one-open-alarm index.
    const alarms = await storage.execute<{ id: string; old_device: string | null }>(
      `with picked as (select id, device_id from alarms where organization_id = ? and user_id = ?${range('created_at')} limit ${batchSize} for update),
       changed as (
         update alarms a set user_id = null, device_id = case when a.device_id is null then null else 'erased-' || left(a.id::text, 8) end,
           floor_id = null, x = null, y = null, lat = null, lng = null, details = a.details - 'position', updated_at = now()
         from picked p where a.id = p.id returning a.id, p.device_id as old_device)
       select id, old_device from changed`,
      [request.organization_id, request.user_id, ...rangeParams],
    );
    if (alarms.length > 0) {
      await storage.execute(
        `update alarm_events e set alarm = e.alarm || jsonb_build_object('user_id', null, 'device_id', a.device_id, 'floor_id', null, 'position', null)
         from alarms a where a.id = e.alarm_id and e.organization_id = ? and e.alarm_id = any(?::uuid[])`,
        [request.organization_id, pgArray(alarms.map((alarm) => alarm.id))],
      );
      // The raises recorded with these alarms (m0035: their details, a place among them) go, and so does every raise
      // key naming the person's device (`pose|`, `max-stay|`, `deadman|`…: the device is the key's second field) that
      // no alarm is recorded with (a repeat's, or one from before m0035): the retry guards of erased conditions. A key
      // recorded with an alarm outside the erased range stays, so a rebuild does not raise that alarm again.
      await storage.execute('delete from alarm_raise_keys where organization_id = ? and alarm_id = any(?::uuid[])', [
        request.organization_id,
        pgArray(alarms.map((alarm) => alarm.id)),
      ]);
      const devices = [...new Set(alarms.map((alarm) => alarm.old_device).filter((device): device is string => device !== null))];
      for (const device of devices) {
        await storage.execute(
          `delete from alarm_raise_keys
           where organization_id = ? and alarm_id is null and substr(key, strpos(key, '|') + 1, length(?) + 1) = ? || '|'`,
          [request.organization_id, device, device],
        );
      }
    }
    removed.alarms_pseudonymized = (removed.alarms_pseudonymized ?? 0) + alarms.length;
    await save('running');
    if (alarms.length < batchSize) break;
  }
  for (;;) {
    // An evacuation's roll is a safety record too: the entry keeps its status, when, the point and who marked it
    // (the counts and times of the evacuation stay true); the person, their devices and their last place go.
    // Its key becomes a pseudonym of its own, unique within the roll, so the roll's primary key holds.
    const entries = await storage.execute<{ seq: string }>(
      `with picked as (
         select r.evacuation_id, r.person_key from evacuation_roll r join evacuations e on e.id = r.evacuation_id
         where e.organization_id = ? and r.user_id = ?${range('e.started_at')} limit ${batchSize} for update of r)
       update evacuation_roll r set person_key = 'erased:' || r.seq, user_id = null, device_ids = '[]'::jsonb,
         floor_id = null, x = null, y = null, lat = null, lng = null, fix_at = null
       from picked p where r.evacuation_id = p.evacuation_id and r.person_key = p.person_key returning r.seq`,
      [request.organization_id, request.user_id, ...rangeParams],
    );
    removed.roll_entries_pseudonymized = (removed.roll_entries_pseudonymized ?? 0) + entries.length;
    await save('running');
    if (entries.length < batchSize) break;
  }
  await save('done');
  return removed;
}

/** About how many positions a heap page holds: a batch of the physical-order pass reads size / this pages. */
const ROWS_PER_PAGE = 50;

/**
 * A person's positions, partition by partition (a day each), in two passes over each that read a row once: through
 * the index of each device the person is known to have used (positions have no index on the person: ingest pays
 * for every index), in time order; then whatever is left (a device no smaller table knew) in physical order (a TID
 * range), so a batch never reads again what an earlier one passed. Every statement names its partition: one on
 * the parent is planned over every partition, which costs more than the batch itself past a few weeks (on
 * embedded storage about 20 ms at 13 days and 145 ms at a year, for every batch, however small, with ingest
 * waiting: bench/README.md). `where` starts `organization_id = ? and user_id = ?`.
 */
async function erasePositions(
  storage: Pick<Storage, 'execute' | 'kind'>,
  where: string,
  params: unknown[],
  batchSize: number,
  counted: (count: number) => Promise<void>,
): Promise<void> {
  const [organizationId, userId] = params as [string, string];
  const devices = await devicesOf(storage, organizationId, userId);
  for (const { name } of await positionPartitions(storage)) {
    for (const device of devices) await eraseByDevice(storage, name, device, where, params, batchSize, counted);
    await eraseByPages(storage, name, where, params, batchSize, counted);
  }
}

/**
 * The device's rows of one partition, keyset on ts: each batch starts its index scan after the last one's end, never
 * over the entries it deleted. The first starts after -infinity rather than with no bound on ts: without one, and
 * without statistics (embedded storage never analyses), the planner read and sorted all of the device's rows of the
 * day to find the first batch (0.4-0.6 s for a day at 1 Hz, once per day partition, with ingest waiting).
 */
async function eraseByDevice(
  storage: Pick<Storage, 'execute' | 'kind'>,
  partition: string,
  device: string,
  where: string,
  params: unknown[],
  batchSize: number,
  counted: (count: number) => Promise<void>,
): Promise<void> {
  const byDevice = `device_id = ? and ${where}`;
  let after: unknown = '-infinity';
  await inPacedBatches(
    storage,
    batchSize,
    async (size) => {
      const [gone] = await storage.execute<{ n: number; last: unknown }>(
        `with bound as (select max(ts) as last from (select ts from ${partition} where ${byDevice} and ts > ? order by ts limit ${size}) first),
         gone as (delete from ${partition} where ${byDevice} and ts > ? and ts <= (select last from bound) returning 1)
         select (select count(*)::int from gone) as n, (select last from bound) as last`,
        [device, ...params, after, device, ...params, after],
      );
      const count = Number(gone?.n ?? 0);
      if (gone?.last !== null && gone?.last !== undefined) after = gone.last;
      return { count, more: count >= size };
    },
    counted,
  );
}

/** What is left of the person in one partition, in whole pages: a TID range is read once, where `order by ctid limit n` would sort the rest. */
async function eraseByPages(
  storage: Pick<Storage, 'execute' | 'kind'>,
  partition: string,
  where: string,
  params: unknown[],
  batchSize: number,
  counted: (count: number) => Promise<void>,
): Promise<void> {
  const [{ pages }] = (await storage.execute<{ pages: number }>(
    `select (pg_relation_size(?::regclass) / current_setting('block_size')::int)::int as pages`,
    [partition],
  )) as [{ pages: number }];
  let page = 0;
  await inPacedBatches(
    storage,
    batchSize,
    async (size) => {
      const span = Math.max(1, Math.round(size / ROWS_PER_PAGE));
      const [gone] = await storage.execute<{ n: number }>(
        `with gone as (delete from ${partition} where ctid >= ?::tid and ctid < ?::tid and ${where} returning 1)
         select count(*)::int as n from gone`,
        [`(${page},0)`, `(${page + span},0)`, ...params],
      );
      page += span;
      return { count: Number(gone?.n ?? 0), more: page < pages };
    },
    counted,
  );
}

/** Devices the person used, as far as anything smaller than the positions tells: their devices, rollups and zone events. */
async function devicesOf(storage: Pick<Storage, 'execute'>, organizationId: string, userId: string): Promise<string[]> {
  const rows = await storage.execute<{ device_id: string }>(
    `select identifier as device_id from devices where organization_id = ? and user_id = ?
     union select device_id from rollup_runs where organization_id = ? and user_id = ?
     union select device_id from zone_events where organization_id = ? and user_id = ?`,
    [organizationId, userId, organizationId, userId, organizationId, userId],
  );
  return rows.map((row) => row.device_id);
}

function present(row: ErasureRequest): ErasureRequest {
  const iso = (value: unknown) => (value === null || value === undefined ? null : new Date(value as string).toISOString());
  return {
    id: row.id,
    organization_id: row.organization_id,
    user_id: row.user_id,
    cause: row.cause,
    from: iso(row.from),
    to: iso(row.to),
    status: row.status,
    removed: typeof row.removed === 'string' ? JSON.parse(row.removed) : row.removed,
    created_at: iso(row.created_at)!,
    finished_at: iso(row.finished_at),
  };
}
