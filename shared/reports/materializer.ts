import type { Logger } from '../logger.js';
import type { Storage } from '../storage/storage.js';
import { inBoundedTransaction, joinSql, sqlOf, UNBOUNDED, type Execute, type Sql } from './report-sql.js';

/**
 * Keeps report data as positions arrive. A positions row is materialised once a pass has rebuilt its
 * device-hour (organization, device, UTC hour of `ts`) after that hour closed: each pass rebuilds, with every
 * materialization, the device-hours of the hours that closed since the stored watermark and those of closed
 * hours that received rows since it (late fixes, found through the BRIN index on received_at, migrations m0011 and m0034),
 * and moves the watermark, all in one transaction, so a report's snapshot sees kept data and watermark agree.
 * An open hour is never rebuilt: rebuilding it at every pass would re-read the whole hour each time, which at
 * tens of thousands of positions a second costs more than the reports it saves; each row is read about once.
 * The watermark stops `lagMs` short of now: a row received earlier but still in a writer's batch commits within
 * that lag (rebuilding a device-hour twice is harmless: a rebuild REPLACES what was kept for it). A device-hour
 * is "pending" while its hour is not closed at the watermark or it has rows received at or past it: reports
 * compute pending device-hours from raw positions. The watermark starts at -infinity, so the first pass builds what was stored before (in chunks
 * of received time); `backfill` rebuilds stored days whose rows sit behind the watermark (imported directly).
 * A pass is paced (`duty`, REPORTS_MATERIALIZE_DUTY): it pauses between batches of device-hours, inside its
 * transaction, so the burst of an hour closing is spread out instead of starving ingest; until it commits, that
 * hour is pending and reports read it raw, so pacing costs report speed for a while, never exactness.
 */
export interface DeviceHour {
  organizationId: string;
  deviceId: string;
  /** Start of a UTC hour. */
  hour: Date;
}

export interface Materialization {
  readonly name: string;
  /** Replaces what this materialization keeps for these device-hours with what the raw positions say, in the caller's transaction. */
  rebuild(execute: Execute, units: readonly DeviceHour[]): Promise<void>;
  /** Retention: deletes what it keeps from before `cutoff`, when the positions it came from are dropped. */
  deleteBefore(execute: Execute, cutoff: Date): Promise<void>;
}

export const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** Received time a catching-up pass takes per transaction. */
const CATCH_UP_CHUNK_MS = 6 * HOUR_MS;
/** Device-hours per rebuild call by default (bounds each statement's arrays). */
const REBUILD_BATCH = 500;
/**
 * Positions per rebuild call by default (a device-hour more than this is a call of its own): in steady state a
 * device-hour holds thousands of positions, and a pass can only pause between calls.
 */
const REBUILD_POSITIONS = 100_000;

/** A device-hour to rebuild, with the positions its query found (all of the hour's if it closed in this pass). */
type Unit = DeviceHour & { positions: number };
/** pg_advisory_xact_lock key of the materializer ('Flrcast' in ASCII). */
const LOCK_KEY = '19822486919148404';

/** The UTC hour of `column`, whatever the session's TimeZone (date_trunc would follow it). */
export const utcHour = (column: string) => `date_bin('1 hour', ${column}, '2000-01-01T00:00:00Z')`;
const floorHour = (ms: number) => Math.floor(ms / HOUR_MS) * HOUR_MS;
const hourMs = (column: string) => `(extract(epoch from ${utcHour(column)}) * 1000)::int8`;

/** Rows received at or after this instant are not materialised yet (-Infinity before the first pass). */
export async function watermark(execute: Execute): Promise<number> {
  const [row] = await execute<{ ms: string | null }>(
    sqlOf(
      `select case when watermark = '-infinity' then null else (extract(epoch from watermark) * 1000)::int8 end as ms from report_watermarks where name = 'reports'`,
    ),
  );
  return row?.ms ? Number(row.ms) : Number.NEGATIVE_INFINITY;
}

/**
 * Says every row received before `at` is materialised (null: none is). For tests and benches that rebuild their
 * device-hours themselves; the materializer moves the watermark in the transaction of the pass that rebuilt them.
 */
export async function setWatermark(storage: Storage, at: Date | null): Promise<void> {
  await storage.execute(`update report_watermarks set watermark = ?::timestamptz where name = 'reports'`, [
    at ? at.toISOString() : '-infinity',
  ]);
}

/**
 * Device-hours of this window not materialised: their hour was still open at the watermark, or they have rows
 * received at or after it. A report computes these from raw positions. `since`: the watermark, when the caller has read it.
 */
export async function pendingDeviceHours(
  execute: Execute,
  organizationId: string,
  from: Date,
  to: Date,
  since?: number,
): Promise<DeviceHour[]> {
  since ??= await watermark(execute);
  const select = (where: Sql) =>
    joinSql([
      sqlOf(`select p.device_id, ${hourMs('p.ts')} as hour_ms from positions p where p.organization_id = ? and `, organizationId),
      where,
      ' group by 1, 2',
    ]);
  // Two narrow reads rather than one filter over the whole window: rows received since the watermark (the BRIN
  // index on received_at finds them), and the hours not closed at the watermark (a short range of ts).
  const queries = Number.isFinite(since)
    ? [
        select(sqlOf('p.ts >= ? and p.ts < ? and p.received_at >= ?', from.toISOString(), to.toISOString(), new Date(since).toISOString())),
        ...(floorHour(since) < to.getTime()
          ? [select(sqlOf('p.ts >= ? and p.ts < ?', new Date(Math.max(from.getTime(), floorHour(since))).toISOString(), to.toISOString()))]
          : []),
      ]
    : [select(sqlOf('p.ts >= ? and p.ts < ?', from.toISOString(), to.toISOString()))];
  // The planner cannot tell how many rows arrived since the watermark (no statistics past the last ANALYZE) and
  // guesses a third of the partition: it then launches parallel workers and compiles the query, which costs a
  // report 100-200 ms to find the few it usually gets. One process, not compiled, for these reads only.
  const [previous] = await execute<{ workers: string; jit: string }>(
    sqlOf(
      `select current_setting('max_parallel_workers_per_gather') as workers, current_setting('jit') as jit, set_config('max_parallel_workers_per_gather', '0', true), set_config('jit', 'off', true)`,
    ),
  );
  const units = new Map<string, DeviceHour>();
  for (const query of queries) {
    for (const row of await execute<{ device_id: string; hour_ms: string }>(query)) {
      units.set(`${row.device_id}\u0000${row.hour_ms}`, { organizationId, deviceId: row.device_id, hour: new Date(Number(row.hour_ms)) });
    }
  }
  await execute(
    sqlOf(`select set_config('max_parallel_workers_per_gather', ?, true), set_config('jit', ?, true)`, previous!.workers, previous!.jit),
  );
  return [...units.values()];
}

/**
 * Pacing: after a rebuild batch that was busy `busyMs`, the pause that keeps the materializer busy `duty` of the
 * time (1: no pause). A top-of-hour pass then takes 1 / duty times as long and takes about duty of the CPU it
 * would; the report tail is exact meanwhile (the hour is pending, read from positions), only slower to read.
 */
export const pauseAfter = (busyMs: number, duty: number): number => (duty >= 1 ? 0 : (busyMs * (1 - duty)) / duty);

export interface MaterializerOptions {
  intervalMs?: number;
  lagMs?: number;
  /** Share of the time a pass may be busy rebuilding (REPORTS_MATERIALIZE_DUTY); 1, the default here, never pauses. */
  duty?: number;
  /** Device-hours per rebuild call; the pass may pause between calls (bounds each statement's arrays). */
  batch?: number;
  /** Positions per rebuild call, as far as device-hours allow (a bigger one is a call of its own). */
  batchPositions?: number;
  /** The clock and the pause, injected by tests. */
  clock?: { now(): number; sleep(ms: number): Promise<void> };
}

const realClock = { now: () => performance.now(), sleep: (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref()) };

export class ReportMaterializer {
  private readonly intervalMs: number;
  private readonly lagMs: number;
  private readonly duty: number;
  private readonly batch: number;
  private readonly batchPositions: number;
  private readonly clock: { now(): number; sleep(ms: number): Promise<void> };
  /** Ends the pause under way (stop()). */
  private wake: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private stopped = true;
  /** Set by stop(): a catch-up ends after its current chunk. */
  private stopping = false;

  constructor(
    private readonly storage: Storage,
    private readonly materializations: readonly Materialization[],
    private readonly logger: Logger,
    options: MaterializerOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? 5_000;
    this.lagMs = options.lagMs ?? 30_000;
    this.duty = options.duty ?? 1;
    this.batch = options.batch ?? REBUILD_BATCH;
    this.batchPositions = options.batchPositions ?? REBUILD_POSITIONS;
    this.clock = options.clock ?? realClock;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.stopping = false;
    const tick = () => {
      this.running = this.runOnce()
        .catch((error) => this.logger.warn({ err: error }, 'report materializer pass failed; the next one retries'))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, this.intervalMs).unref();
        });
    };
    this.timer = setTimeout(tick, this.intervalMs).unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping = true;
    clearTimeout(this.timer);
    this.wake?.();
    await this.running;
  }

  /**
   * One pass: the device-hours of the hours closed since the watermark, and those of closed hours with rows
   * received since it, rebuilt by every materialization.
   */
  async runOnce(now = Date.now()): Promise<number> {
    const until = now - this.lagMs;
    let total = 0;
    await this.summariseReceived();
    for (;;) {
      const step = await this.locked(false, async (execute) => {
        let from = await watermark(execute);
        if (!Number.isFinite(from)) {
          const [first] = await execute<{ ms: string | null }>(
            sqlOf('select (floor(extract(epoch from min(received_at)) * 1000))::int8 as ms from positions'),
          );
          from = first?.ms ? Number(first.ms) : until;
        }
        const to = Math.min(from + CATCH_UP_CHUNK_MS, until);
        if (to <= from) return undefined;
        let next = to;
        const received = await execute(
          sqlOf(
            'select 1 from positions where received_at >= ? and received_at < ? limit 1',
            new Date(from).toISOString(),
            new Date(to).toISOString(),
          ),
        );
        if (received.length === 0 && to < until) {
          // Nothing received in this chunk: skip to the next row received (a quiet month is one step, not 120).
          const [row] = await execute<{ ms: string | null }>(
            sqlOf(
              'select (floor(extract(epoch from min(received_at)) * 1000))::int8 as ms from positions where received_at >= ?',
              new Date(to).toISOString(),
            ),
          );
          next = row?.ms ? Math.min(Number(row.ms), until) : until;
        }
        // Closed by `next`: every hour before its own. Late rows of closed hours, and every row of the hours that closed now.
        const closed = floorHour(next);
        const late = await this.unitsOf(
          execute,
          sqlOf(
            'p.received_at >= ? and p.received_at < ? and p.ts < ?',
            new Date(from).toISOString(),
            new Date(next).toISOString(),
            new Date(closed).toISOString(),
          ),
        );
        const closing =
          floorHour(from) < closed
            ? await this.unitsOf(
                execute,
                sqlOf('p.ts >= ? and p.ts < ?', new Date(floorHour(from)).toISOString(), new Date(closed).toISOString()),
              )
            : [];
        // A device-hour found by both keeps the closing query's count (all of its positions; the late one counts the late ones).
        const units = [
          ...new Map(
            [...late, ...closing].map((unit) => [`${unit.organizationId}\u0000${unit.deviceId}\u0000${unit.hour.getTime()}`, unit]),
          ).values(),
        ];
        await this.rebuild(execute, units, true);
        await execute(sqlOf(`update report_watermarks set watermark = ? where name = 'reports'`, new Date(next).toISOString()));
        return { units: units.length, done: next >= until };
      });
      if (!step) return total;
      total += step.units;
      // A long catch-up yields to stop() between chunks: the watermark keeps what is done.
      if (step.done || this.stopping) return total;
    }
  }

  /** Backfill: every device-hour of [from, to), in bounded chunks (a day each, one transaction each). */
  async backfill(from: Date, to: Date, organizationId?: string): Promise<number> {
    let total = 0;
    for (let start = from.getTime(); start < to.getTime(); start += DAY_MS) {
      const end = Math.min(start + DAY_MS, to.getTime());
      total +=
        (await this.locked(true, async (execute) => {
          const where = [sqlOf('p.ts >= ? and p.ts < ?', new Date(start).toISOString(), new Date(end).toISOString())];
          if (organizationId) where.push(sqlOf('p.organization_id = ?', organizationId));
          const units = await this.unitsOf(execute, joinSql(where, ' and '));
          await this.rebuild(execute, units);
          return units.length;
        })) ?? 0;
      this.logger.info({ from: new Date(start).toISOString(), to: new Date(end).toISOString(), total }, 'reports backfilled');
    }
    return total;
  }

  private async unitsOf(execute: Execute, where: Sql): Promise<Unit[]> {
    const rows = await execute<{ organization_id: string; device_id: string; hour_ms: string; positions: string }>(
      joinSql([
        `select p.organization_id, p.device_id, ${hourMs('p.ts')} as hour_ms, count(*) as positions from positions p where `,
        where,
        ' group by 1, 2, 3',
      ]),
    );
    return rows.map((row) => ({
      organizationId: row.organization_id,
      deviceId: row.device_id,
      hour: new Date(Number(row.hour_ms)),
      positions: Number(row.positions),
    }));
  }

  /**
   * Rebuilds `units` a batch at a time. A paced pass (`paced`, duty below 1) pauses between batches, inside its
   * transaction, so the top-of-hour burst is spread out; stop() ends the pause and the pass finishes unpaced.
   */
  private async rebuild(execute: Execute, units: Unit[], paced = false): Promise<void> {
    for (let i = 0; i < units.length; ) {
      const started = this.clock.now();
      // Up to `batch` device-hours and `batchPositions` positions (at least one device-hour).
      let end = i + 1;
      for (
        let positions = units[i]!.positions;
        end < units.length && end - i < this.batch && positions + units[end]!.positions <= this.batchPositions;
        end++
      )
        positions += units[end]!.positions;
      const batch = units.slice(i, end);
      for (const materialization of this.materializations) await materialization.rebuild(execute, batch);
      i = end;
      const pause = paced && !this.stopping && i < units.length ? pauseAfter(this.clock.now() - started, this.duty) : 0;
      if (pause > 0) await this.pause(pause);
    }
  }

  /** Sleeps `ms`, or less if stop() comes first. */
  private async pause(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      this.wake = resolve;
      void this.clock.sleep(ms).then(resolve);
    });
    this.wake = undefined;
  }

  /**
   * PGlite runs no autovacuum, and a block range of a BRIN index that no VACUUM summarised matches every query: the
   * "received since" reads of a pass read every page of positions, each pass (0.4-1.5 s at a million rows, with
   * ingest waiting: bench/README.md, erasure). On embedded storage a pass summarises the new ranges first (an insert
   * into a summarised range keeps its summary, so each range is read once). On PostgreSQL autovacuum summarises
   * them, and doing it here would cancel autovacuum's runs on positions (both take the same lock).
   */
  private async summariseReceived(): Promise<void> {
    if (this.storage.kind !== 'embedded') return;
    await this.storage.execute(
      `select brin_summarize_new_values(i.inhrelid) from pg_inherits i where i.inhparent = 'positions_received_ts_idx'::regclass`,
    );
  }

  /**
   * One transaction holding the materializer's advisory lock, so two passes (two gateways, a worker, a
   * backfill) never rebuild at once: a pass that finds it taken returns undefined; a backfill waits.
   */
  private locked<T>(wait: boolean, run: (execute: Execute) => Promise<T>): Promise<T | undefined> {
    return inBoundedTransaction(this.storage, UNBOUNDED, async (execute) => {
      if (wait) await execute(sqlOf(`select pg_advisory_xact_lock(${LOCK_KEY})`));
      else {
        const [row] = await execute<{ locked: boolean }>(sqlOf(`select pg_try_advisory_xact_lock(${LOCK_KEY}) as locked`));
        if (!row?.locked) return undefined;
      }
      return run(execute);
    });
  }
}
