/**
 * Pacing: per-organization backlog admission. Counts what this gateway appends to each shard, per organization,
 * reads the shards' backlog from the log, and holds an organization's uploads while its backlog in their shard is
 * at the bound (gateway/cluster/cluster-node.ts asks it through `admit`).
 */
import { DetectionBehindError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import { pacedUploads } from '../../shared/metrics/metrics.js';
import type { ShardLog } from './shard-log.js';

/** Pacing is kept per organization and shard, under this key. */
const pacingKey = (shard: number, organizationId: string) => `${shard}|${organizationId}`;
const shardOfKey = (key: string) => Number(key.slice(0, key.indexOf('|')));
const organizationOfKey = (key: string) => key.slice(key.indexOf('|') + 1);

/** How often the backlog of shards over the bound is read again while uploads wait for it. */
const BACKLOG_POLL_MS = 100;
/**
 * When this gateway's count of an organization's entries reaches the bound, the backlog is read at once (at most
 * this often): the count adds appends to the last read and knows nothing of what the owner acknowledged since, so
 * an organization uploading quickly, with detection keeping up, would reach it and wait for the next poll for
 * nothing (the fairness bench's tenant B alone: one upload in a hundred waited 100 ms).
 */
const BOUND_CHECK_GAP_MS = 10;

/**
 * Uploads wait while their organization's backlog in their shard is at `maxBacklog` entries or more, up to
 * `waitMs`, then fail (503); none: never. Per organization, so one tenant's costly detection never paces another's.
 */
export interface PacingOptions {
  maxBacklog: number;
  waitMs: number;
}

/** An upload waiting for its organization's backlog in its shards to come down. */
interface PacedUpload {
  /** `pacingKey`s of the shards it waits for. */
  keys: string[];
  resolve(): void;
  timer: NodeJS.Timeout;
}

export class Pacing {
  /** Entries appended and not yet acknowledged by the owner, per shard: as last read from the log, plus this gateway's appends since. */
  private readonly backlog = new Map<number, number>();
  /** The same per organization and shard (`pacingKey`): what uploads are paced by. */
  private readonly organizationBacklog = new Map<string, number>();
  /** Shards appended to since the backlog was last read (read again at the next heartbeat). */
  private readonly appendedTo = new Set<number>();
  /** Organizations' shards (`pacingKey`) whose backlog is at the bound: that organization's uploads to them wait. */
  private readonly behind = new Set<string>();
  private readonly paced = new Set<PacedUpload>();
  private pollTimer?: NodeJS.Timeout;
  /** When the pending poll timer fires (performance.now()), and when the last read started. */
  private pollAt = Infinity;
  private lastPollAt = -Infinity;
  private polling?: Promise<void>;

  /** `running`: whether the member runs (no poll is scheduled otherwise). */
  constructor(
    private readonly log: ShardLog,
    private readonly options: PacingOptions | undefined,
    private readonly running: () => boolean,
    private readonly logger: Logger,
  ) {}

  /** The largest backlog of a shard this gateway appended to (metrics). */
  get largestBacklog(): number {
    let backlog = 0;
    for (const entries of this.backlog.values()) backlog = Math.max(backlog, entries);
    return backlog;
  }

  /**
   * Paces uploads to detection, before they are stored: while an organization's backlog in a shard is at the
   * bound, its uploads with positions in that shard wait for the owner to catch up (another organization's
   * uploads to the same shard go on: pacing is per organization and shard), and fails with DetectionBehindError (503, Retry-After) if
   * it has not within the wait, so the app sends it again later rather than detection falling ever further
   * behind. Free while no shard is behind: no Redis round trip per upload, the backlog is read per heartbeat
   * (and every BACKLOG_POLL_MS while a shard is behind) and counted up by this gateway's own appends between.
   */
  admit<R extends { organizationId: string }>(records: readonly R[], shardOf: (record: R) => number): Promise<void> | undefined {
    if (this.behind.size === 0) return undefined;
    const keys = new Set<string>();
    for (const record of records) {
      const key = pacingKey(shardOf(record), record.organizationId);
      if (this.behind.has(key)) keys.add(key);
    }
    if (keys.size === 0) return undefined;
    const waitMs = this.options!.waitMs;
    return new Promise<void>((resolve, reject) => {
      const upload: PacedUpload = {
        keys: [...keys],
        resolve: () => (clearTimeout(upload.timer), this.paced.delete(upload), pacedUploads.waited.inc(), resolve()),
        timer: setTimeout(() => {
          this.paced.delete(upload);
          pacedUploads.refused.inc();
          reject(new DetectionBehindError());
        }, waitMs),
      };
      this.paced.add(upload);
    });
  }

  /**
   * Counts an append towards its shard's backlog and its organization's there; reaching the bound makes that
   * organization's uploads wait.
   */
  appended(shard: number, organizationId: string): void {
    this.backlog.set(shard, (this.backlog.get(shard) ?? 0) + 1);
    this.appendedTo.add(shard);
    const key = pacingKey(shard, organizationId);
    const entries = (this.organizationBacklog.get(key) ?? 0) + 1;
    this.organizationBacklog.set(key, entries);
    if (this.options && entries >= this.options.maxBacklog && !this.behind.has(key)) {
      this.behind.add(key);
      this.schedulePoll(Math.max(0, this.lastPollAt + BOUND_CHECK_GAP_MS - performance.now()));
    }
  }

  /** Stops polling; uploads waiting for detection go on: stopping is not their fault, and their positions are handed over as usual. */
  halt(): void {
    clearTimeout(this.pollTimer);
    this.pollTimer = undefined;
    this.pollAt = Infinity;
    for (const upload of this.paced) upload.resolve();
    this.behind.clear();
  }

  /** Reads the backlog in `delayMs`, or sooner if a read is already due sooner. */
  private schedulePoll(delayMs = BACKLOG_POLL_MS): void {
    if (!this.running()) return;
    const at = performance.now() + delayMs;
    if (this.pollTimer) {
      if (this.pollAt <= at) return;
      clearTimeout(this.pollTimer);
    }
    this.pollAt = at;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = undefined;
      this.pollAt = Infinity;
      void this.poll().finally(() => this.behind.size > 0 && this.schedulePoll());
    }, delayMs);
    this.pollTimer.unref();
  }

  /** Reads the backlog of the shards that have one or were appended to since; lets through the uploads it can. */
  poll(): Promise<void> {
    this.polling ??= (async () => {
      this.lastPollAt = performance.now();
      // Shards with a backlog are read until it is gone (behind ones among them), and those appended to since.
      const shards = [...new Set([...this.appendedTo, ...this.backlog.keys()])];
      this.appendedTo.clear();
      if (shards.length === 0) return;
      let counts: Awaited<ReturnType<ShardLog['organizationBacklog']>>;
      try {
        counts = await this.log.organizationBacklog(shards);
      } catch (error) {
        // Out of reach (Redis down): no backlog can be read, nor grow (hand-offs wait in this gateway, bounded by
        // the outage buffer), and uploads are stored and acknowledged as in any outage, so pacing is suspended
        // and held uploads go on. The counts stay as last read; the first read after the log answers paces again.
        for (const shard of shards) this.appendedTo.add(shard);
        this.behind.clear();
        for (const upload of this.paced) upload.resolve();
        this.logger.warn({ err: error }, "reading the shards' backlog failed; uploads are not paced until it answers");
        return;
      }
      const bound = this.options?.maxBacklog ?? Infinity;
      shards.forEach((shard, index) => {
        const { total, organizations } = counts[index]!;
        if (total > 0) this.backlog.set(shard, total);
        else this.backlog.delete(shard);
        // This shard's organizations as read now: those not named have nothing left in it.
        for (const key of [...this.organizationBacklog.keys()]) {
          if (shardOfKey(key) === shard && !organizations.has(organizationOfKey(key))) this.organizationBacklog.delete(key);
        }
        for (const key of [...this.behind]) {
          if (shardOfKey(key) === shard && !organizations.has(organizationOfKey(key))) this.behind.delete(key);
        }
        for (const [organizationId, entries] of organizations) {
          const key = pacingKey(shard, organizationId);
          this.organizationBacklog.set(key, entries);
          if (entries >= bound) this.behind.add(key);
          else this.behind.delete(key);
        }
      });
      for (const upload of this.paced) if (upload.keys.every((key) => !this.behind.has(key))) upload.resolve();
    })().finally(() => (this.polling = undefined));
    return this.polling;
  }
}
