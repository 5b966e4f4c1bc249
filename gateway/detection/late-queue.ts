import type { Logger } from '../../shared/logger.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { DetectionEngine } from './detection-engine.js';
import type { LateDetection, ReplayedDevice } from './late-detection.js';

/** A late fix waiting, with the fence of the shard read it came in, and when it was added (performance.now()). */
interface Waiting {
  record: PositionRecord;
  holds: () => boolean;
  addedAt: number;
}

/** One organization's late fixes and its replays, one after another. */
interface Series {
  waiting: Waiting[];
  /** Batches added, and how many of the first of them are replayed. */
  added: number;
  replayed: number;
  running?: Promise<void>;
  /** Callers of `replayed()`, each waiting for the batches added before it. */
  waiters: { added: number; resolve: (replayed: boolean) => void }[];
}

/** After an outage, how long a series waits before replaying its fixes again. */
const RETRY_MS = 1000;

/**
 * The late path beside the on-time series instead of in it (issue 30's cost): the late fixes a read leaves after
 * screening (late-detection.ts `screen`) wait here, per organization, and are replayed as a series of their own,
 * so a replay (state rebuilt from storage, minutes of fixes run again) never holds back on-time detection. What
 * waits while a replay runs is taken together by the next: one replay per device for all its fixes that came
 * meanwhile. Until then every fix of a queued device comes here too (detection-engine.ts `queue`), so its zones and
 * stays run in fix-time order, by the replay. A read is acknowledged once its late fixes are replayed
 * (`replayed`), so an owner that dies with fixes waiting here leaves them to the next one, as before.
 */
export class LateQueue {
  private readonly series = new Map<string, Series>();

  constructor(
    private readonly late: Pick<LateDetection, 'run'>,
    private readonly engine: Pick<DetectionEngine, 'queue' | 'release'>,
    private readonly logger: Logger,
    private readonly retryMs = RETRY_MS,
  ) {}

  /** Late fixes of one organization, read under `holds()`: replayed soon, beside the on-time series. */
  add(organizationId: string, records: readonly PositionRecord[], holds: () => boolean): void {
    if (records.length === 0) return;
    let series = this.series.get(organizationId);
    if (!series) this.series.set(organizationId, (series = { waiting: [], added: 0, replayed: 0, waiters: [] }));
    const addedAt = performance.now();
    for (const record of records) series.waiting.push({ record, holds, addedAt });
    series.added++;
    this.engine.queue(records);
    series.running ??= this.run(organizationId, series);
  }

  /**
   * Resolves to true once the late fixes of `organizations` (all, without) added before are replayed, false if a
   * replay stopped at an outage first (the caller asks again later).
   */
  async replayed(organizations?: ReadonlySet<string>): Promise<boolean> {
    const answers = [...this.series]
      .filter(([organizationId]) => !organizations || organizations.has(organizationId))
      .map(([, series]) => {
        if (series.replayed >= series.added) return true;
        return new Promise<boolean>((resolve) => series.waiters.push({ added: series.added, resolve }));
      });
    return (await Promise.all(answers)).every(Boolean);
  }

  private async run(organizationId: string, series: Series): Promise<void> {
    while (series.waiting.length > 0) {
      const added = series.added;
      // A shard given up meanwhile: its fixes are the next owner's (their entries are not acknowledged here).
      const taken = series.waiting.splice(0).filter((waiting) => waiting.holds());
      const holds = () => taken.every((waiting) => waiting.holds());
      let through: Map<string, ReplayedDevice> | false = new Map();
      if (taken.length > 0)
        try {
          through = await this.late.run(
            taken.map((waiting) => waiting.record),
            holds,
          );
        } catch (error) {
          this.logger.warn({ err: error, organizationId }, 'late fixes wait for storage; replayed again shortly');
          series.waiting.unshift(...taken);
          this.answer(series, false);
          await new Promise((resolve) => setTimeout(resolve, this.retryMs));
          continue;
        }
      if (through === false) {
        // Some shard was lost mid-replay: the fixes still held are replayed again.
        series.waiting.unshift(...taken.filter((waiting) => waiting.holds()));
        continue;
      }
      // What came during the round and its device's replay read already (added, so stored, before the replay read
      // the device's fixes, and within the stretch it replayed) needs no other replay. Without this, a device that
      // keeps sending is never released: each round finds its newer fixes waiting, every fix of it goes through a
      // replay, and the queue falls further behind with every late device (the bench's collapse, bench/README.md).
      const replayedOf = through;
      series.waiting = series.waiting.filter(({ record, addedAt }) => {
        const replayed = replayedOf.get(`${record.organizationId}|${record.deviceId}`);
        return !replayed || addedAt >= replayed.readAt || record.timestamp < replayed.from || record.timestamp > replayed.through;
      });
      // A device with fixes waiting again (they came during the replay, after it read them) stays queued for the next one.
      const waitingAgain = new Set(series.waiting.map(({ record }) => `${record.organizationId}|${record.deviceId}`));
      for (const [key, replayed] of through) {
        if (waitingAgain.has(key)) continue;
        const separator = key.indexOf('|');
        this.engine.release(key.slice(0, separator), key.slice(separator + 1), replayed.through);
      }
      // Nothing left waiting: every batch added so far is replayed, those of this round's arrivals included.
      series.replayed = series.waiting.length === 0 ? series.added : added;
      this.answer(series, true);
    }
    series.running = undefined;
    if (series.waiters.length === 0 && this.series.get(organizationId) === series) this.series.delete(organizationId);
  }

  /** Tells the waiters whose batches are replayed (true), or, at an outage, every waiter (false). */
  private answer(series: Series, replayed: boolean): void {
    series.waiters = series.waiters.filter((waiter) => {
      if (replayed && waiter.added > series.replayed) return true;
      waiter.resolve(replayed);
      return false;
    });
  }
}
