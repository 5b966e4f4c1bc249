import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { ZoneEventRecord } from '../detection/zone-event.js';
import { StorageUnavailableError, isOutageError } from '../errors.js';
import type { Logger } from '../logger.js';
import { pgArray } from '../storage/pg-array.js';
import { ServerStorage } from '../storage/server-storage.js';
import { deleteKeptBefore } from '../reports/materializations.js';
import type { Storage } from '../storage/storage.js';
import { BinaryCopyEncoder } from './copy-binary.js';
import { partitionGone, partitionName, positionPartitions } from './position-partitions.js';
import type { PositionRecord } from './position-record.js';

const DAY_MS = 24 * 3600 * 1000;
const dayOf = (epochMs: number) => Math.floor(epochMs / DAY_MS) * DAY_MS;

/** Day partitions the maintenance timer keeps ready ahead of today, so the first fixes of a day find theirs. */
export const PARTITION_DAYS_AHEAD = 3;
/** How often the maintenance timer runs: well under a day, so a missed run costs nothing. */
export const PARTITION_MAINTENANCE_INTERVAL_MS = 3600_000;

export interface PositionStoreOptions {
  /**
   * POSITIONS_MAX_AGE_SECONDS in ms: retention never drops a partition that could still receive an accepted
   * fix (plus a day for clocks that disagree), so no gateway inserts into a partition another one dropped.
   */
  maxAgeMs?: number;
}

const COPY_POSITIONS = `copy positions (organization_id, device_id, user_id, building_id, floor_id, indoor, x, y, lat, lng, yaw, accuracy, ts, received_at)
  from stdin (format binary)`;
const COPY_ZONE_EVENTS =
  'copy zone_events (organization_id, building_id, floor_id, zone_kind, zone_id, device_id, user_id, type, at, fired_at) from stdin (format binary)';
/** Bytes of a position row in binary COPY, besides its device id: a guess that sizes a commit's buffer once. */
const POSITION_ROW_BYTES = 180;
const ZONE_EVENT_ROW_BYTES = 200;

/** The positions of a commit as one binary COPY stream, columns in COPY_POSITIONS' order. */
export function encodePositions(records: readonly PositionRecord[]): Buffer {
  const copy = new BinaryCopyEncoder(64 + records.length * POSITION_ROW_BYTES);
  for (const record of records) {
    copy.row(14);
    copy.uuid(record.organizationId);
    copy.text(record.deviceId);
    copy.uuid(record.userId);
    copy.int4(record.buildingId);
    copy.int4(record.floorId);
    copy.bool(record.indoor);
    copy.float8(record.x);
    copy.float8(record.y);
    copy.float8(record.lat);
    copy.float8(record.lng);
    copy.float8(record.yaw);
    copy.float8(record.accuracy);
    copy.timestamptz(record.timestamp);
    copy.timestamptz(record.receivedAt);
  }
  return copy.finish();
}

/** The zone events of a commit as one binary COPY stream, columns in COPY_ZONE_EVENTS' order. */
export function encodeZoneEvents(events: readonly ZoneEventRecord[]): Buffer {
  const copy = new BinaryCopyEncoder(64 + events.length * ZONE_EVENT_ROW_BYTES);
  for (const event of events) {
    copy.row(10);
    copy.uuid(event.organizationId);
    copy.int4(event.buildingId);
    copy.int4(event.floorId);
    copy.text(event.zoneKind);
    copy.text(event.zoneId);
    copy.text(event.deviceId);
    copy.uuid(event.userId);
    copy.text(event.type);
    copy.timestamptz(event.at);
    copy.timestamptz(event.firedAt);
  }
  return copy.finish();
}

/** Sends one binary COPY stream; resolves once the server has taken every row. */
function copyIn(client: pg.PoolClient, sql: string, data: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const stream = client.query(copyFrom(sql));
    stream.on('error', reject);
    stream.on('finish', resolve);
    stream.end(data);
  });
}

/** A driver error that means "the database is down" becomes the error class the writer and the HTTP layer know. */
const asOutage = (error: unknown): unknown =>
  isOutageError(error) && !(error instanceof StorageUnavailableError) ? new StorageUnavailableError(undefined, error) : error;

/**
 * SQL for the positions table: batched inserts (one transaction per batch, whatever its size: binary COPY on a
 * PostgreSQL server, one `unnest` statement on the embedded database), day partitions created ahead of time (a
 * maintenance timer for today and the next days; `ensurePartitions` for accepted back-dated days, which the
 * writer calls before a write joins the shared commit), retention by dropping whole partitions.
 */
export class PositionStore {
  /** Days whose partition is known to exist; a miss costs one `create table if not exists`. */
  private readonly knownDays = new Set<number>();
  /** Creations under way, so concurrent batches for the same new day share one DDL. */
  private readonly creating = new Map<number, Promise<void>>();
  private maintenance?: NodeJS.Timeout;
  /** The server's writer pool: inserts go as binary COPY through it. Undefined on the embedded database. */
  private readonly copyPool?: pg.Pool;

  constructor(
    private readonly storage: Storage,
    private readonly logger?: Logger,
    private readonly options: PositionStoreOptions = {},
  ) {
    if (storage instanceof ServerStorage) this.copyPool = storage.writerPool;
  }

  /**
   * Creates (if missing) the day partitions these records fall in. Outside any commit: call before inserting.
   * Returns nothing when every day is known already (the common case), so callers can go on synchronously.
   */
  ensurePartitions(records: readonly PositionRecord[]): Promise<void> | undefined {
    let days: Set<number> | undefined;
    for (const record of records) {
      const day = dayOf(record.timestamp);
      if (!this.knownDays.has(day)) (days ??= new Set()).add(day);
    }
    return days && Promise.all([...days].map((day) => this.ensureDay(day))).then(() => undefined);
  }

  /** Today's partition and the next `daysAhead` days'. */
  async createAhead(now = Date.now(), daysAhead = PARTITION_DAYS_AHEAD): Promise<void> {
    for (let i = 0; i <= daysAhead; i++) await this.ensureDay(dayOf(now) + i * DAY_MS);
  }

  /** Creates the partitions ahead now, then every hour; a failed run is logged and retried on the next. */
  async startMaintenance(intervalMs = PARTITION_MAINTENANCE_INTERVAL_MS): Promise<void> {
    const run = () => this.createAhead().catch((error) => this.logger?.warn({ err: error }, 'creating position partitions ahead failed'));
    await run();
    this.maintenance ??= setInterval(run, intervalMs).unref();
  }

  stopMaintenance(): void {
    clearInterval(this.maintenance);
    this.maintenance = undefined;
  }

  private ensureDay(day: number): Promise<void> {
    if (this.knownDays.has(day)) return Promise.resolve();
    let creating = this.creating.get(day);
    if (!creating) {
      creating = this.createDay(day).finally(() => this.creating.delete(day));
      this.creating.set(day, creating);
    }
    return creating;
  }

  private async createDay(day: number): Promise<void> {
    const from = new Date(day).toISOString();
    const to = new Date(day + DAY_MS).toISOString();
    try {
      await this.storage.execute(
        `create table if not exists ${partitionName(day)} partition of positions for values from ('${from}') to ('${to}')`,
      );
    } catch (error) {
      // Another gateway created it between our check and our create: that is the outcome we wanted.
      if (await partitionGone(this.storage, partitionName(day))) throw error;
    }
    this.knownDays.add(day);
  }

  /**
   * Inserts a batch of positions and the zone events detection found in it, atomically (both or neither) and
   * durably once it returns. On a server, as binary COPY in one transaction on a plain `pg` connection (no ORM,
   * no text encoding); on the embedded database, as one `unnest` statement (see `insertUnnest`).
   */
  async insert(
    records: readonly PositionRecord[],
    zoneEvents: readonly ZoneEventRecord[] = [],
    options: { createPartitions?: boolean } = {},
  ): Promise<void> {
    if (records.length === 0 && zoneEvents.length === 0) return;
    // The writer creates partitions before a write joins its shared commit and says `createPartitions: false`,
    // so no DDL ever runs inside it; direct callers (tools, tests) get theirs here.
    if (options.createPartitions !== false) await this.ensurePartitions(records);
    await this.forgettingDroppedDays(
      records,
      this.copyPool ? this.insertCopy(this.copyPool, records, zoneEvents) : this.insertUnnest(records, zoneEvents),
    );
  }

  /**
   * BEGIN; COPY positions; COPY zone_events; COMMIT; a commit of positions alone is one COPY in its own implicit
   * transaction, as atomic and as durable once the server answers (it commits before it answers), without the
   * two statements' CPU (bench `positions-write`). The rows are encoded before a connection is taken, so a value
   * the encoder refuses costs no round trip. On any error the transaction is rolled back; a connection that broke
   * (or could not roll back) is destroyed rather than returned to the pool.
   */
  private async insertCopy(pool: pg.Pool, records: readonly PositionRecord[], zoneEvents: readonly ZoneEventRecord[]): Promise<void> {
    const positions = records.length > 0 ? encodePositions(records) : undefined;
    const events = zoneEvents.length > 0 ? encodeZoneEvents(zoneEvents) : undefined;
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      throw asOutage(error);
    }
    // A checked-out client has no error listener of the pool's: without this one, a connection lost between two
    // statements would be an uncaught 'error' event.
    let broken: Error | undefined;
    const onError = (error: Error) => (broken ??= error);
    client.on('error', onError);
    const explicit = positions !== undefined && events !== undefined;
    try {
      if (explicit) await client.query('begin');
      if (positions) await copyIn(client, COPY_POSITIONS, positions);
      if (events) await copyIn(client, COPY_ZONE_EVENTS, events);
      if (explicit) await client.query('commit');
    } catch (error) {
      if (explicit && !broken) await client.query('rollback').catch((rollbackError: Error) => (broken = rollbackError));
      throw asOutage(error);
    } finally {
      client.removeListener('error', onError);
      client.release(broken);
    }
  }

  /**
   * The embedded database's path: positions, and zone events through a data-modifying CTE, in one statement.
   * Times travel as epoch milliseconds (to_timestamp rounds to the µs, so whole ms stay exact).
   */
  private insertUnnest(records: readonly PositionRecord[], zoneEvents: readonly ZoneEventRecord[]): Promise<void> {
    const column = <T>(pick: (record: PositionRecord) => T) => pgArray(records.map(pick) as never);
    const eventColumn = <T>(pick: (event: ZoneEventRecord) => T) => pgArray(zoneEvents.map(pick) as never);
    const withEvents =
      zoneEvents.length > 0
        ? `with stored_zone_events as (
           insert into zone_events (organization_id, building_id, floor_id, zone_kind, zone_id, device_id, user_id, type, at, fired_at)
           select o, b, f, k, z, d, u, t, to_timestamp(a / 1000), to_timestamp(r / 1000)
           from unnest(?::uuid[], ?::int[], ?::int[], ?::text[], ?::text[], ?::text[], ?::uuid[], ?::text[], ?::float8[], ?::float8[]) as e(o, b, f, k, z, d, u, t, a, r)
         ) `
        : '';
    const eventValues =
      zoneEvents.length > 0
        ? [
            eventColumn((e) => e.organizationId),
            eventColumn((e) => e.buildingId),
            eventColumn((e) => e.floorId),
            eventColumn((e) => e.zoneKind),
            eventColumn((e) => e.zoneId),
            eventColumn((e) => e.deviceId),
            eventColumn((e) => e.userId),
            eventColumn((e) => e.type),
            eventColumn((e) => e.at),
            eventColumn((e) => e.firedAt),
          ]
        : [];
    return this.storage.executeBound(
      `${withEvents}insert into positions (organization_id, device_id, user_id, building_id, floor_id, indoor, x, y, lat, lng, yaw, accuracy, ts, received_at)
       select o, d, u, b, f, i, x, y, la, ln, yw, ac, to_timestamp(t / 1000), to_timestamp(r / 1000)
       from unnest(?::uuid[], ?::text[], ?::uuid[], ?::int[], ?::int[], ?::bool[], ?::float8[], ?::float8[], ?::float8[], ?::float8[],
                   ?::float8[], ?::float8[], ?::float8[], ?::float8[]) as p(o, d, u, b, f, i, x, y, la, ln, yw, ac, t, r)`,
      [
        ...eventValues,
        column((r) => r.organizationId),
        column((r) => r.deviceId),
        column((r) => r.userId),
        column((r) => r.buildingId),
        column((r) => r.floorId),
        column((r) => r.indoor),
        column((r) => r.x),
        column((r) => r.y),
        column((r) => r.lat),
        column((r) => r.lng),
        column((r) => r.yaw),
        column((r) => r.accuracy),
        column((r) => r.timestamp),
        column((r) => r.receivedAt),
      ],
    );
  }

  /**
   * A partition this gateway knew of but another one dropped (an older gateway, an operator): forget the days
   * of the failed insert, so the caller's retry recreates them instead of failing the same way for good.
   */
  private async forgettingDroppedDays(records: readonly PositionRecord[], inserting: Promise<void>): Promise<void> {
    try {
      await inserting;
    } catch (error) {
      if (/no partition of relation/i.test(String((error as Error)?.message)))
        for (const record of records) this.knownDays.delete(dayOf(record.timestamp));
      throw error;
    }
  }

  /**
   * Drops every day partition that ends before `now - retentionDays`; returns the names dropped. Never one that
   * could still receive an accepted fix (see `PositionStoreOptions.maxAgeMs`), whatever the retention says.
   */
  async dropPartitionsOlderThan(retentionDays: number, now = Date.now()): Promise<string[]> {
    const acceptedFrom = this.options.maxAgeMs === undefined ? Infinity : dayOf(now - this.options.maxAgeMs - DAY_MS);
    const cutoff = Math.min(dayOf(now - retentionDays * DAY_MS), acceptedFrom);
    const dropped: string[] = [];
    for (const { name, day } of await positionPartitions(this.storage)) {
      if (day !== null && day + DAY_MS <= cutoff) {
        await this.storage.execute(`drop table if exists ${name}`);
        this.knownDays.delete(day);
        dropped.push(name);
      }
    }
    // What the reports keep from those positions (shared/reports/materializations.ts) goes with them, at every
    // sweep, not only when a partition went: a sweep that stopped after the drop leaves none behind.
    await deleteKeptBefore((query) => this.storage.execute(query.text, query.params), new Date(cutoff));
    if (dropped.length > 0) this.logger?.info({ dropped }, 'dropped position partitions past retention');
    return dropped;
  }
}
