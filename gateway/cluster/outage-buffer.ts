/**
 * The outage buffer: hand-offs the shard log refused (Redis away), held in memory by shard, in order, and
 * appended once the log takes them again; bounded by MAX_WAITING_RECORDS, past which the oldest are dropped, loudly.
 */
import type { Logger } from '../../shared/logger.js';
import type { EncodedPositions } from '../../shared/positions/positions-message.js';

/**
 * Positions held in memory at most while the shard log refuses them (about 200 bytes each as records, plus about
 * 100 once packed for the log).
 */
const MAX_WAITING_RECORDS = 500_000;

export class OutageBuffer {
  /** Batches refused by the log (Redis down), by shard, appended in order once it is back. */
  private readonly waiting = new Map<number, EncodedPositions[]>();
  private waitingCount = 0;

  /** `append`: appends one batch to the log (and counts it); rejects while the log refuses. */
  constructor(
    private readonly append: (shard: number, positions: EncodedPositions) => Promise<void>,
    private readonly logger: Logger,
  ) {}

  /** Positions waiting for the log to take them. */
  get records(): number {
    return this.waitingCount;
  }

  /** Whether anything waits at all. */
  get empty(): boolean {
    return this.waiting.size === 0;
  }

  /** Whether batches of this shard wait (later ones must queue behind them). */
  holds(shard: number): boolean {
    return this.waiting.has(shard);
  }

  add(shard: number, positions: EncodedPositions): void {
    const queue = this.waiting.get(shard) ?? [];
    queue.push(positions);
    this.waiting.set(shard, queue);
    this.waitingCount += positions.value.records.length;
    while (this.waitingCount > MAX_WAITING_RECORDS) {
      const [oldest, batches] = this.waiting.entries().next().value!;
      const lost = batches.shift()!.value.records.length;
      this.waitingCount -= lost;
      if (batches.length === 0) this.waiting.delete(oldest);
      this.logger.error(
        { shard: oldest, positions: lost },
        'too many positions waiting for the shard log: oldest dropped from detection (they are stored)',
      );
    }
  }

  /** Appends what waits, shard by shard in order; stops at the first refusal (retried next heartbeat). */
  async flush(): Promise<void> {
    for (const [shard, batches] of this.waiting) {
      while (batches.length > 0) {
        try {
          await this.append(shard, batches[0]!);
        } catch {
          return;
        }
        this.waitingCount -= batches.shift()!.value.records.length;
      }
      this.waiting.delete(shard);
    }
  }
}
