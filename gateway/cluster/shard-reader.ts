/**
 * The shard read loop: reads the ready shards' new entries from the log and has each shard's processed under its
 * fence, shard by shard: a shard is read again as soon as its own entries are done, whatever the others are doing
 * (a shard of costly buildings never holds back the reads of another's). What was processed is acknowledged once
 * what it caused is stored.
 */
import type { Logger } from '../../shared/logger.js';
import type { ShardHandler } from './shard-handler.js';
import type { HeldShard, ShardLeases } from './shard-leases.js';
import { isGroupGone, type ShardEntry, type ShardLog } from './shard-log.js';

/**
 * Entries processed whose detections are still being stored, past which a shard is read again only once its own
 * are stored: the next reads are detected while earlier ones are stored (detection does not wait out a commit per
 * read), a few deep, and a tenant whose storage lags holds back only its own shards.
 */
const MAX_UNSTORED_ENTRIES = 64;
/**
 * While a shard's entries are being processed, a read of the others waits at most this long for a new entry, so
 * a shard whose entries are done joins the next read within it (a blocked read cannot take another shard in).
 */
const BUSY_READ_BLOCK_MS = 20;

export class ShardReader {
  private reading?: Promise<void>;
  /** Shards whose entries are being processed (or whose storage is waited for): not read until done. */
  private readonly busy = new Map<number, Promise<void>>();
  /** Acknowledging what was processed, once stored: one at a time per organization, beside reading. */
  private readonly settling = new Map<string, Promise<void>>();

  /** `running`: whether the member runs (the loop ends once it does not); `blockMs`: the longest a read waits. */
  constructor(
    private readonly log: ShardLog,
    private readonly handler: ShardHandler,
    private readonly leases: ShardLeases,
    private readonly blockMs: number,
    private readonly running: () => boolean,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.reading = this.readLoop();
  }

  /**
   * Resolves once the loop has ended (after `running` turned false and the reader was woken) and every shard's
   * entries under way are done.
   */
  stopped(): Promise<void> | undefined {
    return this.reading;
  }

  /**
   * Acknowledges entries processed, once what they caused is stored; runs until nothing more can be (all done,
   * storage refusing: retried after the next read, or the lease lost). Entries processed meanwhile are taken
   * in the next pass: only those counted before `stored()` was asked are acknowledged by its answer.
   *
   * Per organization, each on its own: asked about all of them at once, a tenant whose costly detections keep
   * coming (its lane never empty at the end of a drain) would hold every other tenant's entries unacknowledged,
   * in their backlog, and pace their uploads (issue 28 item 6). An entry is one upload: one organization's.
   */
  settle(organizations?: Iterable<string>): Promise<void> {
    const asked = new Set<string>(organizations);
    if (organizations === undefined) {
      for (const [, state] of this.leases.states) for (const organizationId of state.unackedOrganizations) asked.add(organizationId);
    }
    return Promise.all([...asked].map((organizationId) => this.settleOrganization(organizationId))).then(() => undefined);
  }

  private settleOrganization(organizationId: string): Promise<void> {
    let settling = this.settling.get(organizationId);
    if (settling) return settling;
    settling = (async () => {
      for (;;) {
        const rounds: { shard: number; state: HeldShard; ids: Set<string> }[] = [];
        for (const [shard, state] of this.leases.states) {
          const ids = new Set(state.unacked.filter((_, index) => state.unackedOrganizations[index] === organizationId));
          if (ids.size > 0) rounds.push({ shard, state, ids });
        }
        if (rounds.length === 0 || !(await this.handler.stored(new Set([organizationId])))) return;
        let acknowledged = 0;
        for (const { shard, state, ids } of rounds) acknowledged += await this.acknowledge(shard, state, ids);
        if (acknowledged === 0) return;
      }
    })()
      .catch((error) => this.logger.error({ err: error }, 'acknowledging shard entries failed'))
      .finally(() => this.settling.delete(organizationId));
    this.settling.set(organizationId, settling);
    return settling;
  }

  /** Acknowledges these entries processed, while the lease is still held (a fenced owner acknowledges nothing). */
  private async acknowledge(shard: number, state: HeldShard, wanted: ReadonlySet<string>): Promise<number> {
    if (!this.leases.current(shard, state)) return 0;
    const ids: string[] = [];
    const organizations: string[] = [];
    for (let index = state.unacked.length - 1; index >= 0; index--) {
      if (!wanted.has(state.unacked[index]!)) continue;
      ids.unshift(state.unacked.splice(index, 1)[0]!);
      organizations.unshift(state.unackedOrganizations.splice(index, 1)[0]!);
    }
    if (ids.length === 0) return 0;
    try {
      await this.log.ack(shard, ids);
      return ids.length;
    } catch (error) {
      // Back in front: older than anything processed since, so the next round counts them again.
      state.unacked.unshift(...ids);
      state.unackedOrganizations.unshift(...organizations);
      this.logger.warn({ err: error, shard }, 'acknowledging shard entries failed; retried');
      return 0;
    }
  }

  private async readLoop(): Promise<void> {
    while (this.running()) {
      const idle = this.leases.readyShards.filter((shard) => !this.busy.has(shard));
      if (idle.length === 0) {
        // Woken as soon as a shard turns ready or one's entries are done.
        await this.leases.untilReady(this.blockMs);
        continue;
      }
      const blockMs = this.busy.size > 0 ? Math.min(BUSY_READ_BLOCK_MS, this.blockMs) : this.blockMs;
      await this.leases.track(
        idle,
        this.read(idle, blockMs).catch((error) => this.logger.error({ err: error }, 'reading shard entries failed')),
      );
    }
    await Promise.all(this.busy.values());
  }

  /** Reads these idle shards' new entries (waiting up to blockMs for one) and starts processing each shard's. */
  private async read(shards: number[], blockMs: number): Promise<void> {
    let delivered: Map<number, ShardEntry[]>;
    try {
      delivered = await this.log.read(shards, blockMs);
    } catch (error) {
      if (!this.running()) return;
      if (isGroupGone(error)) {
        // Redis lost the streams (a restart): every shard is taken again from storage.
        this.logger.warn('shard streams are gone (Redis restarted?): rebuilding every shard held');
        for (const shard of shards) void this.leases.drop(shard, false);
      } else {
        this.logger.warn({ err: error }, 'reading shard streams failed');
        await new Promise((resolve) => setTimeout(resolve, this.blockMs));
      }
      return;
    }
    // Started here, before the read counts as ended, so a shard given back meanwhile waits for its processing.
    for (const [shard, entries] of delivered) {
      const state = this.leases.stateOf(shard);
      // Given up meanwhile: left pending, for the next owner.
      if (!state || !this.leases.holds(shard)) continue;
      const done = this.processShard(shard, state, entries).finally(() => {
        this.busy.delete(shard);
        this.leases.wake();
      });
      this.busy.set(shard, done);
    }
  }

  /**
   * Processes one shard's entries, in order, while the other shards are read and processed: the handler yields
   * between short slices (gateway/detection/owner-detection.ts), so a shard of costly buildings takes turns with
   * the others. Acknowledged once stored, while the next reads are detected; past a few reads' worth unstored,
   * this shard is read again only once its own organizations' detections are.
   */
  private async processShard(shard: number, state: HeldShard, entries: ShardEntry[]): Promise<void> {
    await this.leases.track(
      [shard],
      this.leases.process(shard, state, entries).catch((error) => {
        // Left pending: the shard is taken again from storage, which replays them (e.g. after a database outage).
        this.logger.error({ err: error, shard }, 'processing shard entries failed; the shard is taken again');
        void this.leases.drop(shard, false);
      }),
    );
    void this.settle();
    let unstored = 0;
    for (const [, held] of this.leases.states) unstored += held.unacked.length;
    if (unstored > MAX_UNSTORED_ENTRIES && state.unacked.length > 0) await this.settle(state.unackedOrganizations);
  }
}
