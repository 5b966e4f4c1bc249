import type { Logger } from '../../shared/logger.js';
import { detectionLateQueueFixes, detectionLateReplayWait } from '../../shared/metrics/metrics.js';
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
 * Once the oldest fix of a round has waited this long, its replays no longer yield to ingest beyond resting as long
 * as they worked (half the thread): under a flood that outlasts it the backlog drains instead of growing without
 * bound, and its reads' entries, acknowledged only once replayed, stay well under the backlog that paces uploads
 * (CLUSTER_MAX_BACKLOG, 1,000 entries: at 100 fixes an upload, 5 s of 20,000 fixes/s).
 */
const CATCH_UP_AFTER_MS = 5000;
/** The share of the thread replays keep once they must catch up: as long a rest as the replay took. */
const CATCH_UP_SHARE = 0.5;

/**
 * How the replays yield to ingest (shared/pacing.ts `restAfterWork` on embedded storage, where their statements
 * run in the gateway's thread): rest after a replay that took `took` ms, keeping at least `minShare` of the time
 * (the rule's own minimum unless given).
 */
export type ReplayPace = (took: number, minShare?: number) => Promise<void>;

/**
 * The late path beside the on-time series instead of in it (issue 30's cost): the late fixes a read leaves after
 * screening (late-detection.ts `screen`) wait here, per organization, and are replayed as a series of their own,
 * so a replay (state rebuilt from storage, minutes of fixes run again) never holds back on-time detection. What
 * waits while a replay runs is taken together by the next: one replay per device for all its fixes that came
 * meanwhile. Until then every fix of a queued device comes here too (detection-engine.ts `queue`), so its zones and
 * stays run in fix-time order, by the replay. A read is acknowledged once its late fixes are replayed
 * (`replayed`), so an owner that dies with fixes waiting here leaves them to the next one, as before.
 *
 * On embedded storage a replay's statements (about ten) run in the gateway's own thread, so beside the on-time
 * series is not yet out of its way: there each replay then rests by the rule background work shares the thread by
 * (`pace`, shared/pacing.ts): at least as long as it took, and on while ingest keeps the thread busy, down to a
 * twentieth of the time; once a round's oldest fix has waited CATCH_UP_AFTER_MS, only as long as it took. Late
 * events then come later under a flood (how long: `floorcast_detection_late_replay_wait_seconds`, and what waits:
 * `floorcast_detection_late_queue_fixes`).
 */
export class LateQueue {
  private readonly series = new Map<string, Series>();

  constructor(
    private readonly late: Pick<LateDetection, 'run'>,
    private readonly engine: Pick<DetectionEngine, 'queue' | 'release'>,
    private readonly logger: Logger,
    private readonly retryMs = RETRY_MS,
    /** None: replays run back to back (on a server their statements run in the database's processes). */
    private readonly pace?: ReplayPace,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** Late fixes of one organization, read under `holds()`: replayed soon, beside the on-time series. */
  add(organizationId: string, records: readonly PositionRecord[], holds: () => boolean): void {
    if (records.length === 0) return;
    let series = this.series.get(organizationId);
    if (!series) this.series.set(organizationId, (series = { waiting: [], added: 0, replayed: 0, waiters: [] }));
    const addedAt = this.clock();
    for (const record of records) series.waiting.push({ record, holds, addedAt });
    detectionLateQueueFixes.inc(records.length);
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
      const all = series.waiting.splice(0);
      const taken = all.filter((waiting) => waiting.holds());
      detectionLateQueueFixes.dec(all.length - taken.length);
      const holds = () => taken.every((waiting) => waiting.holds());
      const startedAt = this.clock();
      let oldest = Infinity;
      for (const waiting of taken) {
        oldest = Math.min(oldest, waiting.addedAt);
        detectionLateReplayWait.observe((startedAt - waiting.addedAt) / 1000);
      }
      // Each replay yields to ingest (pacing), until the round's oldest fix has waited too long: then it catches up.
      const { pace, clock } = this;
      const rest = pace && ((took: number) => pace(took, clock() - oldest >= CATCH_UP_AFTER_MS ? CATCH_UP_SHARE : undefined));
      let through: Map<string, ReplayedDevice> | false = new Map();
      if (taken.length > 0)
        try {
          through = await this.late.run(
            taken.map((waiting) => waiting.record),
            holds,
            rest,
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
        const again = taken.filter((waiting) => waiting.holds());
        detectionLateQueueFixes.dec(taken.length - again.length);
        series.waiting.unshift(...again);
        continue;
      }
      detectionLateQueueFixes.dec(taken.length);
      // What came during the round and its device's replay read already (added, so stored, before the replay read
      // the device's fixes, and within the stretch it replayed) needs no other replay. Without this, a device that
      // keeps sending is never released: each round finds its newer fixes waiting, every fix of it goes through a
      // replay, and the queue falls further behind with every late device (the bench's collapse, bench/README.md).
      const replayedOf = through;
      const waitingBefore = series.waiting.length;
      series.waiting = series.waiting.filter(({ record, addedAt }) => {
        const replayed = replayedOf.get(`${record.organizationId}|${record.deviceId}`);
        return !replayed || addedAt >= replayed.readAt || record.timestamp < replayed.from || record.timestamp > replayed.through;
      });
      detectionLateQueueFixes.dec(waitingBefore - series.waiting.length);
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
