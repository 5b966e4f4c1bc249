import type { ZoneEventRecord } from '../detection/zone-event.js';
import type { PositionRecord } from './position-record.js';
import type { PositionStore } from './position-store.js';

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
 */
export class PositionWriter {
  private pending: PendingWrite[] = [];
  private pendingRows = 0;
  private running: Promise<void> | undefined;

  constructor(
    private readonly store: PositionStore,
    /** Rows per insert statement; a larger backlog is split over several commits. */
    private readonly maxBatchRows = 10_000,
  ) {}

  /** Resolves once every record is committed; rejects if the batch holding them failed (nothing of it stored). */
  write(records: readonly PositionRecord[], zoneEvents: readonly ZoneEventRecord[] = []): Promise<void> {
    if (records.length === 0 && zoneEvents.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ records, zoneEvents, resolve, reject });
      this.pendingRows += records.length + zoneEvents.length;
      this.running ??= new Promise<void>((done) => setImmediate(done)).then(() => this.drain());
    });
  }

  /** Resolves when everything written so far is committed (graceful shutdown). */
  async flush(): Promise<void> {
    while (this.running) await this.running;
  }

  get backlog(): number {
    return this.pendingRows;
  }

  private async drain(): Promise<void> {
    try {
      while (this.pending.length > 0) {
        const batch: PendingWrite[] = [];
        let rows = 0;
        // Whole writes only: a caller's rows are never split across two commits.
        const rowsOf = (write: PendingWrite) => write.records.length + write.zoneEvents.length;
        while (this.pending.length > 0 && (batch.length === 0 || rows + rowsOf(this.pending[0]!) <= this.maxBatchRows)) {
          const write = this.pending.shift()!;
          batch.push(write);
          rows += rowsOf(write);
        }
        this.pendingRows -= rows;
        try {
          await this.store.insert(
            batch.length === 1 ? batch[0]!.records : batch.flatMap((write) => write.records),
            batch.length === 1 ? batch[0]!.zoneEvents : batch.flatMap((write) => write.zoneEvents),
          );
          for (const write of batch) write.resolve();
        } catch (error) {
          for (const write of batch) write.reject(error);
        }
      }
    } finally {
      this.running = undefined;
    }
  }
}
