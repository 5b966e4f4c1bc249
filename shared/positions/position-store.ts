import type { ZoneEventRecord } from '../detection/zone-event.js';
import type { Logger } from '../logger.js';
import { pgArray } from '../storage/pg-array.js';
import { deleteRollupsBefore } from '../reports/rollups.js';
import type { Storage } from '../storage/storage.js';
import type { PositionRecord } from './position-record.js';

const DAY_MS = 24 * 3600 * 1000;
const partitionName = (dayStart: number) => `positions_p${new Date(dayStart).toISOString().slice(0, 10).replace(/-/g, '')}`;
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

/**
 * SQL for the positions table: batched inserts (one `unnest` statement per batch, whatever its size),
 * day partitions created ahead of time (a maintenance timer for today and the next days; `ensurePartitions`
 * for accepted back-dated days, which the writer calls before a write joins the shared commit), retention by
 * dropping whole partitions.
 */
export class PositionStore {
  /** Days whose partition is known to exist; a miss costs one `create table if not exists`. */
  private readonly knownDays = new Set<number>();
  /** Creations under way, so concurrent batches for the same new day share one DDL. */
  private readonly creating = new Map<number, Promise<void>>();
  private maintenance?: NodeJS.Timeout;

  constructor(
    private readonly storage: Storage,
    private readonly logger?: Logger,
    private readonly options: PositionStoreOptions = {},
  ) {}

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
      await this.storage.execute(`create table if not exists ${partitionName(day)} partition of positions for values from ('${from}') to ('${to}')`);
    } catch (error) {
      // Another gateway created it between our check and our create: that is the outcome we wanted.
      const exists = await this.storage.execute('select 1 from pg_class where relname = ?', [partitionName(day)]);
      if (exists.length === 0) throw error;
    }
    this.knownDays.add(day);
  }

  /**
   * Inserts a batch of positions, and the zone events detection found in it, in one statement (the events
   * through a data-modifying CTE): atomic, one commit for both, and durable once it returns. Times travel as
   * epoch milliseconds (to_timestamp rounds to the µs, so whole ms stay exact): formatting two ISO dates per
   * position was a tenth of the insert's cost in the gateway.
   */
  async insert(records: readonly PositionRecord[], zoneEvents: readonly ZoneEventRecord[] = [], options: { createPartitions?: boolean } = {}): Promise<void> {
    if (records.length === 0 && zoneEvents.length === 0) return;
    // The writer creates partitions before a write joins its shared commit and says `createPartitions: false`,
    // so no DDL ever runs inside it; direct callers (tools, tests) get theirs here.
    if (options.createPartitions !== false) await this.ensurePartitions(records);
    const column = <T>(pick: (record: PositionRecord) => T) => pgArray(records.map(pick) as never);
    const eventColumn = <T>(pick: (event: ZoneEventRecord) => T) => pgArray(zoneEvents.map(pick) as never);
    const withEvents = zoneEvents.length > 0
      ? `with stored_zone_events as (
           insert into zone_events (organization_id, building_id, floor_id, zone_kind, zone_id, device_id, user_id, type, at, fired_at)
           select o, b, f, k, z, d, u, t, to_timestamp(a / 1000), to_timestamp(r / 1000)
           from unnest(?::uuid[], ?::int[], ?::int[], ?::text[], ?::text[], ?::text[], ?::uuid[], ?::text[], ?::float8[], ?::float8[]) as e(o, b, f, k, z, d, u, t, a, r)
         ) `
      : '';
    const eventValues = zoneEvents.length > 0
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
    await this.forgettingDroppedDays(records, this.storage.executeBound(
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
    ));
  }

  /**
   * A partition this gateway knew of but another one dropped (an older gateway, an operator): forget the days
   * of the failed insert, so the caller's retry recreates them instead of failing the same way for good.
   */
  private async forgettingDroppedDays(records: readonly PositionRecord[], inserting: Promise<void>): Promise<void> {
    try {
      await inserting;
    } catch (error) {
      if (/no partition of relation/i.test(String((error as Error)?.message))) for (const record of records) this.knownDays.delete(dayOf(record.timestamp));
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
    const partitions = await this.storage.execute<{ name: string }>(
      `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent
       where p.relname = 'positions'`,
    );
    const dropped: string[] = [];
    for (const { name } of partitions) {
      const match = /^positions_p(\d{4})(\d{2})(\d{2})$/.exec(name);
      if (!match) continue;
      const day = Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3]));
      if (day + DAY_MS <= cutoff) {
        await this.storage.execute(`drop table if exists ${name}`);
        this.knownDays.delete(day);
        dropped.push(name);
      }
    }
    // Every sweep, not only when a partition went: a sweep that stopped after the drop leaves none behind.
    await deleteRollupsBefore((query) => this.storage.execute(query.text, query.params), new Date(cutoff));
    if (dropped.length > 0) this.logger?.info({ dropped }, 'dropped position partitions past retention');
    return dropped;
  }
}
