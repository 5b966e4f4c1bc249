import type { PositionRecord } from './position-record.js';
import type { PositionStore } from './position-store.js';

interface PendingWrite {
  records: readonly PositionRecord[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit. Every caller waits for the commit that contains its rows, so an acknowledgement is a promise
 * that nothing is lost; concurrent callers share one insert. While one insert runs, new writes gather for
 * the next, so under load batches grow by themselves and at rest a write waits only for the current tick.
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
  write(records: readonly PositionRecord[]): Promise<void> {
    if (records.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ records, resolve, reject });
      this.pendingRows += records.length;
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
        while (this.pending.length > 0 && (batch.length === 0 || rows + this.pending[0]!.records.length <= this.maxBatchRows)) {
          const write = this.pending.shift()!;
          batch.push(write);
          rows += write.records.length;
        }
        this.pendingRows -= rows;
        try {
          await this.store.insert(batch.length === 1 ? batch[0]!.records : batch.flatMap((write) => write.records));
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
