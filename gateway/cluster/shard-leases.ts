/**
 * Membership and shard leases: the heartbeat, the leases this member holds (with their fence, `validUntil`),
 * taking a shard (rebuild, then what the previous owner left pending) and giving one back once work under way
 * on it ends. Rendezvous hashing over the live members says which shards to hold.
 */
import type { Logger } from '../../shared/logger.js';
import type { Coordination } from './coordination.js';
import { shardsOwnedBy } from './rendezvous.js';
import type { ShardHandler } from './shard-handler.js';
import type { ShardEntry, ShardLog } from './shard-log.js';

export interface HeldShard {
  /** 'starting' while its buildings are rebuilt and its pending entries replayed; 'ready' once read live. */
  phase: 'starting' | 'ready';
  /** This member's clock reading before the request that last took or renewed the lease, plus its TTL. */
  validUntil: number;
  /** Entries processed whose detections still wait in storage's outbox: acknowledged once stored. */
  unacked: string[];
  /** The organization of each of `unacked` (an entry is one upload: one organization's positions). */
  unackedOrganizations: string[];
  /** The gain under way (rebuild, replay). */
  starting: Promise<void>;
}

/**
 * A shard is taken only through its lease, so two members that disagree for a moment about who is alive never
 * both own one. Fencing: a lease counts as held only until `validUntil`, measured from before the request that
 * renewed it, so this member stops emitting before Redis lets anyone else take the shard.
 */
export class ShardLeases {
  private readonly held = new Map<number, HeldShard>();
  /** Shards being given up: not taken again before their state is dropped. */
  private readonly leaving = new Map<number, Promise<void>>();
  private members: string[] = [];
  private wakeReader?: () => void;
  /**
   * Work under way with the shards it concerns: reads (a blocking one, up to heartbeatMs) and the processing of
   * what they delivered. A shard's state is dropped and its lease given back only after its own: every entry the
   * log delivered to this member is then either processed or left pending here, where the next owner's
   * `takePending` finds it; a read still blocked when the lease is given back would take entries meant for the
   * next owner, who never reads them.
   */
  private readonly underway = new Map<Promise<void>, readonly number[]>();

  constructor(
    private readonly coordination: Coordination,
    private readonly log: ShardLog,
    private readonly handler: ShardHandler,
    private readonly options: { shards: number; ttlMs: number },
    private readonly logger: Logger,
  ) {}

  get memberId(): string {
    return this.coordination.memberId;
  }

  /** Live members as of the last heartbeat. */
  get liveMembers(): readonly string[] {
    return this.members;
  }

  /** Shards whose lease this member holds (starting or ready). */
  get heldShards(): number[] {
    return [...this.held.keys()].filter((shard) => this.holds(shard));
  }

  /** Shards rebuilt and read live. */
  get readyShards(): number[] {
    return this.heldShards.filter((shard) => this.held.get(shard)!.phase === 'ready');
  }

  /** Every shard held, with its state (lease valid or not). */
  get states(): Iterable<[number, HeldShard]> {
    return this.held;
  }

  /** The shard's state, if this member has it (lease valid or not). */
  stateOf(shard: number): HeldShard | undefined {
    return this.held.get(shard);
  }

  /** Whether this member holds the shard's lease now (the fence of everything it emits for the shard). */
  holds(shard: number): boolean {
    const state = this.held.get(shard);
    return state !== undefined && Date.now() < state.validUntil;
  }

  /** Whether `state` is still this shard's, under a lease held now. */
  current(shard: number, state: HeldShard): boolean {
    return this.held.get(shard) === state && this.holds(shard);
  }

  /** Tracks work on these shards (it must not reject): they are dropped only once it ends. */
  track(shards: readonly number[], work: Promise<void>): Promise<void> {
    const tracked: Promise<void> = work.finally(() => this.underway.delete(tracked));
    this.underway.set(tracked, shards);
    return tracked;
  }

  /** Waits until a shard turns ready, `wake()` is called (a shard's entries done) or `ms` pass. */
  async untilReady(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wakeReader = () => (clearTimeout(timer), resolve());
    });
    this.wakeReader = undefined;
  }

  wake(): void {
    this.wakeReader?.();
  }

  /** Refreshes membership and renews the leases held (`started`: the clock before the first request); drops the lapsed ones. */
  async renew(started: number): Promise<void> {
    try {
      this.members = await this.coordination.heartbeat();
    } catch (error) {
      this.logger.warn({ err: error }, 'cluster heartbeat failed; leases lapse unless it comes back');
    }
    const shards = [...this.held.keys()];
    try {
      const renewed = await this.coordination.renew(shards);
      shards.forEach((shard, index) => {
        // Gone: expired while Redis was out of reach, or Redis restarted without it. Taken again from scratch.
        if (!renewed[index]) void this.drop(shard, false);
        else this.held.get(shard)!.validUntil = started + this.options.ttlMs;
      });
    } catch (error) {
      this.logger.warn({ err: error }, 'renewing shard leases failed');
    }
    for (const shard of this.held.keys()) if (!this.holds(shard)) void this.drop(shard, false);
  }

  /** Gives back the shards this member should no longer own and tries to take the ones it should. */
  async rebalance(started: number): Promise<void> {
    const wanted = new Set(shardsOwnedBy(this.memberId, this.members, this.options.shards));
    for (const shard of this.held.keys()) if (!wanted.has(shard)) void this.drop(shard, true);
    for (const shard of wanted) {
      if (this.held.has(shard) || this.leaving.has(shard)) continue;
      try {
        if (await this.coordination.acquire(shard)) this.take(shard, started);
      } catch (error) {
        this.logger.warn({ err: error, shard }, 'taking a shard lease failed');
        break;
      }
    }
  }

  /** Gives every shard back, each once work under way on it ends. */
  async releaseAll(): Promise<void> {
    for (const shard of [...this.held.keys()]) await this.drop(shard, true);
    await Promise.all(this.leaving.values());
  }

  /** Lets every lease lapse at once, giving nothing back, as a crash would. */
  lapseAll(): void {
    for (const state of this.held.values()) state.validUntil = 0;
  }

  /** Processes entries under the shard's fence; they are acknowledged by the reader once what they caused is stored. */
  async process(shard: number, state: HeldShard, entries: readonly ShardEntry[]): Promise<void> {
    await this.handler.process(shard, entries, () => this.current(shard, state));
    for (const entry of entries) {
      state.unacked.push(entry.id);
      state.unackedOrganizations.push(entry.records[0]?.organizationId ?? '');
    }
  }

  private take(shard: number, started: number): void {
    const state: HeldShard = {
      phase: 'starting',
      validUntil: started + this.options.ttlMs,
      unacked: [],
      unackedOrganizations: [],
      starting: Promise.resolve(),
    };
    this.held.set(shard, state);
    state.starting = (async () => {
      await this.log.open(shard);
      await this.handler.gain(shard);
      // What the previous owner left unacknowledged comes before anything new.
      const pending = await this.log.takePending(shard);
      if (pending.length > 0) await this.process(shard, state, pending);
      if (this.held.get(shard) === state) {
        state.phase = 'ready';
        this.wakeReader?.();
      }
    })().catch((error) => {
      this.logger.error({ err: error, shard }, 'taking over a shard failed; it is given back and taken again');
      void this.drop(shard, true);
    });
  }

  /** Stops owning a shard: nothing of it is read or emitted any more; its state is dropped once work under way ends. */
  drop(shard: number, release: boolean): Promise<void> {
    const state = this.held.get(shard);
    if (!state) return this.leaving.get(shard) ?? Promise.resolve();
    this.held.delete(shard);
    const leaving = (async () => {
      await state.starting;
      await Promise.all([...this.underway].filter(([, shards]) => shards.includes(shard)).map(([work]) => work));
      this.handler.lose(shard);
      if (release) {
        await this.coordination
          .release(shard)
          .catch((error) => this.logger.warn({ err: error, shard }, 'releasing a shard lease failed; it will expire'));
      }
    })().finally(() => this.leaving.delete(shard));
    this.leaving.set(shard, leaving);
    return leaving;
  }
}
