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
  /** Acknowledging what was processed, once stored (one at a time, beside reading). */
  private settling?: Promise<void>;

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
   * Each shard's entries wait only for their own organizations' detections: asked about all of them at once,
   * a tenant whose costly detections keep coming would hold every other tenant's entries unacknowledged, in their
   * backlog, until its own ran dry, and pace their uploads (issue 28 item 6).
   */
  settle(): Promise<void> {
    this.settling ??= (async () => {
      for (;;) {
        const rounds = [...this.leases.states]
          .filter(([, state]) => state.unacked.length > 0)
          .map(([shard, state]) => {
            const count = state.unacked.length;
            return { shard, state, count, organizations: new Set(state.unackedOrganizations.slice(0, count)) };
          });
        if (rounds.length === 0) return;
        const acknowledged = await Promise.all(
          rounds.map(async ({ shard, state, count, organizations }) => {
            const stored = new Set<string>();
            await Promise.all(
              [...organizations].map(async (organizationId) => {
                if (await this.handler.stored(new Set([organizationId]))) stored.add(organizationId);
              }),
            );
            return this.acknowledge(shard, state, count, stored);
          }),
        );
        if (acknowledged.every((count) => count === 0)) return;
      }
    })()
      .catch((error) => this.logger.error({ err: error }, 'acknowledging shard entries failed'))
      .finally(() => (this.settling = undefined));
    return this.settling;
  }

  /**
   * Acknowledges those of the first `count` entries processed whose organization's detections are `stored`, while
   * the lease is still held (a fenced owner acknowledges nothing).
   */
  private async acknowledge(shard: number, state: HeldShard, count: number, stored: ReadonlySet<string>): Promise<number> {
    if (count === 0 || stored.size === 0 || !this.leases.current(shard, state)) return 0;
    const ids: string[] = [];
    const organizations: string[] = [];
    for (let index = count - 1; index >= 0; index--) {
      if (!stored.has(state.unackedOrganizations[index]!)) continue;
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
