import type { ZoneEventRecord } from '../detection/zone-event.js';
import type { PositionRecord } from './position-record.js';
import { groupCommitRows, groupCommitSeconds } from '../metrics/metrics.js';
import { failsEveryBatch } from './commit-failure.js';
import type { PositionStore } from './position-store.js';

/** Partitions are created per write before it joins a commit (see `write`), never inside the commit. */
const NO_DDL = { createPartitions: false } as const;

interface PendingWrite {
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
 */
export class PositionWriter {
  private pending: PendingWrite[] = [];
  private pendingRows = 0;
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
  ) {}

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
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ records, zoneEvents, resolve, reject });
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
      while (this.committing < this.maxConcurrentCommits && this.pending.length > 0) void this.commit(this.take());
    });
  }

  /** The oldest pending writes, whole (a caller's rows are never split across two commits), up to the row cap. */
  private take(): PendingWrite[] {
    const batch: PendingWrite[] = [];
    let rows = 0;
    const rowsOf = (write: PendingWrite) => write.records.length + write.zoneEvents.length;
    while (this.pending.length > 0 && (batch.length === 0 || rows + rowsOf(this.pending[0]!) <= this.maxBatchRows)) {
      const write = this.pending.shift()!;
      batch.push(write);
      rows += rowsOf(write);
    }
    this.pendingRows -= rows;
    return batch;
  }

  private async commit(batch: PendingWrite[]): Promise<void> {
    this.committing++;
    const started = performance.now();
    try {
      await this.commitIsolated(batch);
    } finally {
      groupCommitSeconds.observe((performance.now() - started) / 1000);
      let rows = 0;
      for (const write of batch) rows += write.records.length + write.zoneEvents.length;
      groupCommitRows.observe(rows);
      this.committing--;
      // What gathered during this commit goes next, in one insert.
      if (this.pending.length > 0) this.schedule();
      else this.settleIdle();
    }
  }

  private isIdle(): boolean {
    return this.committing === 0 && this.pending.length === 0 && this.preparing === 0;
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
