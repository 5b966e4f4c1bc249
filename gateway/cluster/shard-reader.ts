/**
 * The shard read loop: reads the ready shards' new entries from the log, has them processed under each shard's
 * fence, one round at a time (leases are given back only between rounds), and acknowledges them once what they
 * caused is stored.
 */
import type { Logger } from '../../shared/logger.js';
import type { ShardHandler } from './shard-handler.js';
import type { HeldShard, ShardLeases } from './shard-leases.js';
import { isGroupGone, type ShardEntry, type ShardLog } from './shard-log.js';

/**
 * Entries processed whose detections are still being stored, past which reading waits for storage: the next
 * reads are detected while earlier ones are stored (detection no longer waits out a commit per read), a few deep.
 */
const MAX_UNSTORED_ENTRIES = 64;

export class ShardReader {
  private reading?: Promise<void>;
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

  /** Resolves once the loop has ended (after `running` turned false and the reader was woken). */
  stopped(): Promise<void> | undefined {
    return this.reading;
  }

  /**
   * Acknowledges entries processed, once what they caused is stored; runs until nothing more can be (all done,
   * storage refusing: retried after the next read, or the lease lost). Entries processed meanwhile are taken
   * in the next round: only those counted before `stored()` was asked are acknowledged by its answer.
   *
   * Per organization, each on its own: asked about all of them at once, a tenant whose costly detections keep
   * coming (its lane never empty at the end of a drain) would hold every other tenant's entries unacknowledged,
   * in their backlog, and pace their uploads (issue 28 item 6). An entry is one upload: one organization's.
   */
  settle(): Promise<void> {
    const organizations = new Set<string>();
    for (const [, state] of this.leases.states) for (const organizationId of state.unackedOrganizations) organizations.add(organizationId);
    return Promise.all([...organizations].map((organizationId) => this.settleOrganization(organizationId))).then(() => undefined);
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
      const ready = this.leases.readyShards;
      if (ready.length === 0) {
        await this.leases.untilReady(this.blockMs);
        continue;
      }
      await this.leases.round(this.readRound(ready).catch((error) => this.logger.error({ err: error }, 'processing shard entries failed')));
    }
  }

  /** Reads the ready shards' new entries (waiting up to blockMs for one) and processes them. */
  private async readRound(ready: number[]): Promise<void> {
    let delivered: Map<number, ShardEntry[]>;
    try {
      delivered = await this.log.read(ready, this.blockMs);
    } catch (error) {
      if (!this.running()) return;
      if (isGroupGone(error)) {
        // Redis lost the streams (a restart): every shard is taken again from storage.
        this.logger.warn('shard streams are gone (Redis restarted?): rebuilding every shard held');
        for (const shard of ready) void this.leases.drop(shard, false);
      } else {
        this.logger.warn({ err: error }, 'reading shard streams failed');
        await new Promise((resolve) => setTimeout(resolve, this.blockMs));
      }
      return;
    }
    // The shards' entries are processed at once, not one shard after another: the handler yields between short
    // slices (gateway/detection/owner-detection.ts), so a shard of costly buildings takes turns with the others
    // instead of holding their positions back until all of its own are done. Each shard's stay in order.
    await Promise.all(
      [...delivered].map(async ([shard, entries]) => {
        const state = this.leases.stateOf(shard);
        // Given up meanwhile: left pending, for the next owner.
        if (!state || !this.leases.holds(shard)) return;
        try {
          await this.leases.process(shard, state, entries);
        } catch (error) {
          // Left pending: the shard is taken again from storage, which replays them (e.g. after a database outage).
          this.logger.error({ err: error, shard }, 'processing shard entries failed; the shard is taken again');
          void this.leases.drop(shard, false);
        }
      }),
    );
    // Acknowledged once stored, while the next reads are detected; past a few reads' worth, storage sets the pace.
    const settling = this.settle();
    let unstored = 0;
    for (const [, state] of this.leases.states) unstored += state.unacked.length;
    if (unstored > MAX_UNSTORED_ENTRIES) await settling;
  }
}
