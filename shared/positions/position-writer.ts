import type { ZoneEventRecord } from '../detection/zone-event.js';
import type { PositionRecord } from './position-record.js';
import { groupCommitRows, groupCommitSeconds } from '../metrics/metrics.js';
import { failsEveryBatch } from './commit-failure.js';
import type { PositionStore } from './position-store.js';

/** Partitions are created per write before it joins a commit (see `write`), never inside the commit. */
const NO_DDL = { createPartitions: false } as const;

interface PendingWrite {
  /** Whose rows these are: each commit takes the organizations' writes in turn. */
  organizationId: string;
  records: readonly PositionRecord[];
  zoneEvents: readonly ZoneEventRecord[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit. Every caller waits for the commit that contains its rows, so an acknowledgement is a promise
 * that nothing is lost; concurrent callers share one insert. While one insert runs, new writes gather for
 * the next, so under load batches grow by themselves and at rest a write waits only for the current tick.
 * The zone events detection found in a batch ride in the same commit: one commit per flush, not one per upload.
 *
 * One caller's bad rows never fail another's: when a shared insert fails, the callers' writes are retried apart
 * (by halves, so one bad write among n costs about 2·log2(n) more inserts) and only the writes that fail alone
 * are rejected. A failure of the database itself (see `failsEveryBatch`) rejects them all at once instead.
 *
 * Fairness between organizations (issue 28 item 6): each organization's writes wait in their own queue, in
 * order, and a commit takes the organizations' oldest writes in turn, starting with the one served longest ago.
 * With `commitBudgetMs` (embedded storage, one connection: every other write waits for the commit in hand) a
 * commit also takes no more rows than the last commits' time says fit in that budget, so a tenant flooding its
 * uploads or zone events fills commits of its own, one after another, and another tenant's small write waits for
 * at most the one in hand (which is at least one whole write: a write is never split). Smaller commits cost the
 * flooding tenant throughput (each has a fixed cost), so the budget holds only while another organization has
 * written within SHARED_WINDOW_MS: an organization alone gets commits of up to `maxBatchRows`, as before.
 */
/** Rows a time-bounded commit may always take, whatever the last commits' time (a few small writes together). */
const MIN_BUDGETED_ROWS = 50;
/** How recent another organization's write must be for the commit budget to hold (see the class comment). */
const SHARED_WINDOW_MS = 2000;

export interface PositionWriterOptions {
  /**
   * Milliseconds one commit should hold the database: the row cap follows the last commits' time to stay near it
   * (never above `maxBatchRows`, never below MIN_BUDGETED_ROWS). Undefined: always `maxBatchRows`.
   */
  commitBudgetMs?: number;
  /** Milliseconds, as `performance.now()` (tests give their own). */
  clock?: () => number;
}

export class PositionWriter {
  /**
   * Each organization's pending writes, oldest first, and when it was last served (`turn` then; 0: never). Emptied
   * queues stay until nothing is pending or committing, so an organization just served keeps its place at the back.
   */
  private readonly queues = new Map<string, { writes: PendingWrite[]; servedAt: number }>();
  private turn = 0;
  private pendingWrites = 0;
  private pendingRows = 0;
  /** Rows the next commit may take (moves with the commits' time when there is a budget). */
  private rowCap: number;
  private readonly commitBudgetMs: number | undefined;
  private readonly clock: () => number;
  /** When each organization last wrote, within SHARED_WINDOW_MS (older ones are forgotten when looked at). */
  private readonly lastWriteAt = new Map<string, number>();
  /** Commits under way; `flush()` callers in `idle` are resolved when there are none and nothing is pending. */
  private committing = 0;
  private scheduled = false;
  /** Writes creating their partitions, not yet pending: `flush()` waits for them too. */
  private preparing = 0;
  private idle: (() => void)[] = [];

  constructor(
    private readonly store: PositionStore,
    /** Rows per commit (positions and zone events); a larger backlog is split over several commits. */
    private readonly maxBatchRows = 10_000,
    /**
     * Commits allowed at once. One on a single-connection database; more on a server, so a batch arriving
     * while a commit runs starts its own at once instead of waiting a whole commit for its turn.
     */
    private readonly maxConcurrentCommits = 1,
    options: PositionWriterOptions = {},
  ) {
    this.commitBudgetMs = options.commitBudgetMs;
    this.clock = options.clock ?? (() => performance.now());
    this.rowCap = maxBatchRows;
  }

  /** Rows the next commit may take while the budget holds: `maxBatchRows`, or less (see the class comment). */
  get commitRowCap(): number {
    return this.rowCap;
  }

  /**
   * Resolves once every record is committed; rejects if the batch holding them failed (nothing of it stored).
   * The day partitions the records need are created first, by this caller alone: DDL never runs inside the
   * shared commit, where every other caller would wait for it (or fail with it).
   */
  write(records: readonly PositionRecord[], zoneEvents: readonly ZoneEventRecord[] = []): Promise<void> {
    if (records.length === 0 && zoneEvents.length === 0) return Promise.resolve();
    const partitions = records.length > 0 ? this.store.ensurePartitions(records) : undefined;
    if (!partitions) return this.enqueue(records, zoneEvents);
    this.preparing++;
    return partitions.then(
      () => {
        this.preparing--;
        return this.enqueue(records, zoneEvents);
      },
      (error: unknown) => {
        this.preparing--;
        this.settleIdle();
        throw error;
      },
    );
  }

  private enqueue(records: readonly PositionRecord[], zoneEvents: readonly ZoneEventRecord[]): Promise<void> {
    const organizationId = records[0]?.organizationId ?? zoneEvents[0]?.organizationId ?? '';
    if (this.commitBudgetMs !== undefined) {
      // Deleted first, so the map stays in order of last write: the oldest are at its front.
      this.lastWriteAt.delete(organizationId);
      this.lastWriteAt.set(organizationId, this.clock());
    }
    return new Promise<void>((resolve, reject) => {
      const write = { organizationId, records, zoneEvents, resolve, reject };
      const queue = this.queues.get(organizationId);
      if (queue) queue.writes.push(write);
      else this.queues.set(organizationId, { writes: [write], servedAt: 0 });
      this.pendingWrites++;
      this.pendingRows += records.length + zoneEvents.length;
      this.schedule();
    });
  }

  /** Resolves when everything written so far is committed (graceful shutdown). */
  flush(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  get backlog(): number {
    return this.pendingRows;
  }

  /** Waits for the current tick, so writes made together share a commit. */
  private schedule(): void {
    if (this.scheduled || this.committing >= this.maxConcurrentCommits) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (this.committing < this.maxConcurrentCommits && this.pendingWrites > 0) void this.commit(this.take());
    });
  }

  /**
   * Pending writes, whole (a caller's rows are never split across two commits), up to the row cap: the oldest of
   * each organization in turn, the organization served longest ago (or never) first. An organization served
   * goes to the back of the turn, so while one commit holds a flooding tenant's write, another tenant's write
   * arriving meanwhile goes first in the next.
   */
  private take(): PendingWrite[] {
    const batch: PendingWrite[] = [];
    let rows = 0;
    const cap = this.shared() ? this.rowCap : this.maxBatchRows;
    const rowsOf = (write: PendingWrite) => write.records.length + write.zoneEvents.length;
    for (;;) {
      let next: { writes: PendingWrite[]; servedAt: number } | undefined;
      for (const queue of this.queues.values()) if (queue.writes.length > 0 && (!next || queue.servedAt < next.servedAt)) next = queue;
      if (!next) break;
      const write = next.writes[0]!;
      if (batch.length > 0 && rows + rowsOf(write) > cap) break;
      next.writes.shift();
      next.servedAt = ++this.turn;
      batch.push(write);
      rows += rowsOf(write);
    }
    this.pendingWrites -= batch.length;
    this.pendingRows -= rows;
    return batch;
  }

  /** Whether the commit budget holds: under one, when at least two organizations wrote within SHARED_WINDOW_MS. */
  private shared(): boolean {
    if (this.commitBudgetMs === undefined) return false;
    const since = this.clock() - SHARED_WINDOW_MS;
    for (const [organizationId, at] of this.lastWriteAt) {
      if (at >= since) break;
      this.lastWriteAt.delete(organizationId);
    }
    return this.lastWriteAt.size >= 2;
  }

  /**
   * Under a budget, the next commit's row cap from this one's time: towards `commitBudgetMs`, at most doubling
   * (as retention.ts's paced batches). Only a commit that was near full or over the budget says something about
   * the cap; a small one's time is mostly the commit's fixed cost.
   */
  private adjustRowCap(rows: number, tookMs: number): void {
    const budget = this.commitBudgetMs;
    if (budget === undefined || rows === 0 || (rows < this.rowCap / 2 && tookMs <= budget)) return;
    const fits = Math.round((rows * budget) / Math.max(tookMs, 0.1));
    const floor = Math.min(MIN_BUDGETED_ROWS, this.maxBatchRows);
    this.rowCap = Math.max(floor, Math.min(this.maxBatchRows, this.rowCap * 2, fits));
  }

  private async commit(batch: PendingWrite[]): Promise<void> {
    this.committing++;
    const started = this.clock();
    try {
      await this.commitIsolated(batch);
    } finally {
      const took = this.clock() - started;
      groupCommitSeconds.observe(took / 1000);
      let rows = 0;
      for (const write of batch) rows += write.records.length + write.zoneEvents.length;
      groupCommitRows.observe(rows);
      this.adjustRowCap(rows, took);
      this.committing--;
      // What gathered during this commit goes next, in one insert.
      if (this.pendingWrites > 0) this.schedule();
      else {
        // Nothing pending, nothing committing: the turn starts afresh (the organizations of the past forgotten).
        if (this.committing === 0) this.queues.clear();
        this.settleIdle();
      }
    }
  }

  private isIdle(): boolean {
    return this.committing === 0 && this.pendingWrites === 0 && this.preparing === 0;
  }

  private settleIdle(): void {
    if (this.isIdle()) for (const resolve of this.idle.splice(0)) resolve();
  }

  /**
   * Inserts the writes together; if that fails for something in them, each half again, down to single writes.
   * Returns the outage error that stopped it, if one did: the remaining halves are then rejected untried.
   */
  private async commitIsolated(batch: PendingWrite[]): Promise<unknown> {
    try {
      await this.store.insert(
        batch.length === 1 ? batch[0]!.records : batch.flatMap((write) => write.records),
        batch.length === 1 ? batch[0]!.zoneEvents : batch.flatMap((write) => write.zoneEvents),
        NO_DDL,
      );
    } catch (error) {
      // The insert is atomic (one transaction), so nothing of a failed one is stored: retrying its writes is safe.
      const outage = failsEveryBatch(error);
      if (batch.length === 1 || outage) {
        for (const write of batch) write.reject(error);
        return outage ? error : undefined;
      }
      const middle = Math.ceil(batch.length / 2);
      const stopped = await this.commitIsolated(batch.slice(0, middle));
      if (stopped === undefined) return this.commitIsolated(batch.slice(middle));
      for (const write of batch.slice(middle)) write.reject(stopped);
      return stopped;
    }
    for (const write of batch) write.resolve();
    return undefined;
  }
}
