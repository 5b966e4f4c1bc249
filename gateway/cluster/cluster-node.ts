import { EncodedPayload } from '../../shared/bus/encoded-payload.js';
import { DetectionBehindError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import { pacedUploads } from '../../shared/metrics/metrics.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { PositionsMessage, type EncodedPositions } from '../../shared/positions/positions-message.js';
import type { PositionHandOff } from '../pipeline/ports.js';
import type { Coordination } from './coordination.js';
import { shardOfBuilding, shardOfDevice, shardsOwnedBy } from './rendezvous.js';
import { isGroupGone, type ShardEntry, type ShardLog } from './shard-log.js';

/** Pacing is kept per organization and shard, under this key. */
const pacingKey = (shard: number, organizationId: string) => `${shard}|${organizationId}`;
const shardOfKey = (key: string) => Number(key.slice(0, key.indexOf('|')));
const organizationOfKey = (key: string) => key.slice(key.indexOf('|') + 1);

/** What an owner does with its shards (detection: gateway/detection/detection-shards.ts). */
export interface ShardHandler {
  /** A shard arrives: restore the state of its buildings from storage, before any of its entries is processed. */
  gain(shard: number): Promise<void>;
  /** A shard left: drop its buildings' state (nothing of it is emitted any more). */
  lose(shard: number): void;
  /**
   * Processes entries in order; resolves once what they caused is queued for storage (false: fenced, nothing
   * emitted). `holds()` says whether this member still holds the shard: output is fenced by it.
   */
  process(shard: number, entries: readonly ShardEntry[], holds: () => boolean): Promise<boolean>;
  /** Stores what waits; resolves to true once nothing does (entries processed before may then be acknowledged). */
  stored(): Promise<boolean>;
  /** Buildings known in a held shard (metrics). */
  buildingsIn(shard: number): number;
}

/** Positions held in memory at most while the shard log refuses them (about 200 bytes each as records, plus about 100 once packed for the log). */
const MAX_WAITING_RECORDS = 500_000;

/**
 * Entries processed whose detections are still being stored, past which reading waits for storage: the next
 * reads are detected while earlier ones are stored (detection no longer waits out a commit per read), a few deep.
 */
const MAX_UNSTORED_ENTRIES = 64;

/** How often the backlog of shards over the bound is read again while uploads wait for it. */
const BACKLOG_POLL_MS = 100;

export interface ClusterOptions {
  shards: number;
  heartbeatMs: number;
  /** Lifetime of a heartbeat and of a lease without renewal. */
  ttlMs: number;
  /**
   * Uploads wait while their organization's backlog in their shard is at `maxBacklog` entries or more, up to
   * `waitMs`, then fail (503); none: never. Per organization, so one tenant's costly detection never paces another's.
   */
  pacing?: { maxBacklog: number; waitMs: number };
}

/** An upload waiting for its organization's backlog in its shards to come down. */
interface PacedUpload {
  /** `pacingKey`s of the shards it waits for. */
  keys: string[];
  resolve(): void;
  timer: NodeJS.Timeout;
}

interface HeldShard {
  /** 'starting' while its buildings are rebuilt and its pending entries replayed; 'ready' once read live. */
  phase: 'starting' | 'ready';
  /** This member's clock reading before the request that last took or renewed the lease, plus its TTL. */
  validUntil: number;
  /** Entries processed whose detections still wait in storage's outbox: acknowledged once stored. */
  unacked: string[];
  /** The gain under way (rebuild, replay). */
  starting: Promise<void>;
}

/**
 * One member of the cluster of gateways. Every heartbeat it refreshes its membership, computes the shards it
 * should own (rendezvous hashing over the live members), renews the leases it holds, gives back the shards it
 * should no longer own and tries to take the ones it should. A shard is taken only through its lease, so two
 * members that disagree for a moment about who is alive never both own one. A taken shard is rebuilt from
 * storage, its entries left pending by the previous owner are processed, then new entries are read live.
 *
 * Fencing: a lease counts as held only until `validUntil`, measured from before the request that renewed it,
 * so this member stops emitting before Redis lets anyone else take the shard.
 */
export class ClusterNode implements PositionHandOff {
  private readonly held = new Map<number, HeldShard>();
  /** Shards being given up: not taken again before their state is dropped. */
  private readonly leaving = new Map<number, Promise<void>>();
  private members: string[] = [];
  private running = false;
  private tickTimer?: NodeJS.Timeout;
  private ticking?: Promise<void>;
  private reading?: Promise<void>;
  private wakeReader?: () => void;
  /** Batches refused by the log (Redis down), by shard, appended in order once it is back. */
  private readonly waiting = new Map<number, EncodedPositions[]>();
  private waitingCount = 0;
  /**
   * The read loop's current round, from the read (a blocking one, up to heartbeatMs) to the end of its processing:
   * a shard's state is dropped and its lease given back only after it. Every entry the log delivered to this
   * member is then either processed or left pending here, where the next owner's `takePending` finds it; a read
   * still blocked when the lease is given back would take entries meant for the next owner, who never reads them.
   */
  private processing: Promise<unknown> = Promise.resolve();
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
  private polling?: Promise<void>;
  /** Acknowledging what was processed, once stored (one at a time, beside reading). */
  private settling?: Promise<void>;

  constructor(
    private readonly coordination: Coordination,
    private readonly log: ShardLog,
    private readonly handler: ShardHandler,
    private readonly options: ClusterOptions,
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

  /** What /metrics reports of the cluster as this member sees it; `backlog`: the largest backlog of a shard it appended to. */
  view(): { members: number; ownedBuildings: number; readyBuildings: number; backlog: number } {
    const count = (shards: number[]) => shards.reduce((total, shard) => total + this.handler.buildingsIn(shard), 0);
    let backlog = 0;
    for (const entries of this.backlog.values()) backlog = Math.max(backlog, entries);
    return { members: this.members.length, ownedBuildings: count(this.heldShards), readyBuildings: count(this.readyShards), backlog };
  }

  /**
   * Paces uploads to detection, before they are stored: while an organization's backlog in a shard is at the
   * bound, its uploads with positions in that shard wait for the owner to catch up (another organization's
   * uploads to the same shard go on: pacing is per organization and shard), and fails with DetectionBehindError (503, Retry-After) if
   * it has not within the wait, so the app sends it again later rather than detection falling ever further
   * behind. Free while no shard is behind: no Redis round trip per upload, the backlog is read per heartbeat
   * (and every BACKLOG_POLL_MS while a shard is behind) and counted up by this gateway's own appends between.
   */
  admit(records: readonly PositionRecord[]): Promise<void> | undefined {
    if (this.behind.size === 0) return undefined;
    const keys = new Set<string>();
    for (const record of records) {
      const key = pacingKey(this.shardOf(record), record.organizationId);
      if (this.behind.has(key)) keys.add(key);
    }
    if (keys.size === 0) return undefined;
    const waitMs = this.options.pacing!.waitMs;
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

  /** Counts an append towards its shard's backlog and its organization's there; reaching the bound makes that organization's uploads wait. */
  private appended(shard: number, organizationId: string): void {
    this.backlog.set(shard, (this.backlog.get(shard) ?? 0) + 1);
    this.appendedTo.add(shard);
    const key = pacingKey(shard, organizationId);
    const entries = (this.organizationBacklog.get(key) ?? 0) + 1;
    this.organizationBacklog.set(key, entries);
    if (this.options.pacing && entries >= this.options.pacing.maxBacklog && !this.behind.has(key)) {
      this.behind.add(key);
      this.schedulePoll();
    }
  }

  private schedulePoll(): void {
    if (this.pollTimer || !this.running) return;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = undefined;
      void this.pollBacklog().finally(() => this.behind.size > 0 && this.schedulePoll());
    }, BACKLOG_POLL_MS);
    this.pollTimer.unref();
  }

  /** Reads the backlog of the shards that have one or were appended to since; lets through the uploads it can. */
  private pollBacklog(): Promise<void> {
    this.polling ??= (async () => {
      // Shards with a backlog are read until it is gone (behind ones among them), and those appended to since.
      const shards = [...new Set([...this.appendedTo, ...this.backlog.keys()])];
      this.appendedTo.clear();
      if (shards.length === 0) return;
      let counts: Awaited<ReturnType<ShardLog['organizationBacklog']>>;
      try {
        counts = await this.log.organizationBacklog(shards);
      } catch (error) {
        // Out of reach (Redis down): no backlog can be read, nor grow (hand-offs wait in this gateway, bounded by
        // MAX_WAITING_RECORDS), and uploads are stored and acknowledged as in any outage, so pacing is suspended
        // and held uploads go on. The counts stay as last read; the first read after the log answers paces again.
        for (const shard of shards) this.appendedTo.add(shard);
        this.behind.clear();
        for (const upload of this.paced) upload.resolve();
        this.logger.warn({ err: error }, 'reading the shards\' backlog failed; uploads are not paced until it answers');
        return;
      }
      const bound = this.options.pacing?.maxBacklog ?? Infinity;
      shards.forEach((shard, index) => {
        const { total, organizations } = counts[index]!;
        if (total > 0) this.backlog.set(shard, total);
        else this.backlog.delete(shard);
        // This shard's organizations as read now: those not named have nothing left in it.
        for (const key of [...this.organizationBacklog.keys()]) if (shardOfKey(key) === shard && !organizations.has(organizationOfKey(key))) this.organizationBacklog.delete(key);
        for (const key of [...this.behind]) if (shardOfKey(key) === shard && !organizations.has(organizationOfKey(key))) this.behind.delete(key);
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

  /** Whether this member owns the building's detection now (`null`, no building: nobody else could). */
  ownsBuilding(buildingId: number | null): boolean {
    return buildingId === null || this.holds(shardOfBuilding(buildingId, this.options.shards));
  }

  shardOf(record: Pick<PositionRecord, 'buildingId' | 'organizationId' | 'deviceId'>): number {
    return record.buildingId !== null ? shardOfBuilding(record.buildingId, this.options.shards) : shardOfDevice(record.organizationId, record.deviceId, this.options.shards);
  }

  /** Whether this member holds the shard's lease now (the fence of everything it emits for the shard). */
  holds(shard: number): boolean {
    const state = this.held.get(shard);
    return state !== undefined && Date.now() < state.validUntil;
  }

  /**
   * Hands accepted (committed) positions to the owners of their shards. Never rejects: while the log refuses
   * (Redis down), a shard's batches wait here, in order, and are appended by the next heartbeats once it is
   * back; later batches of that shard queue behind them. So an upload is acknowledged whatever Redis does, as
   * its positions are stored; only a crash of this gateway during a Redis outage loses what waits here (its
   * positions stay stored, and the owner's rebuild reads them). Bounded by MAX_WAITING_RECORDS, past which the
   * oldest batches are dropped, loudly.
   *
   * `published`: the same records as the bus published them; when they all fall in one shard (an upload from one
   * building), the shard's entry is their bytes, not packed again.
   */
  async handOff(records: readonly PositionRecord[], published?: EncodedPositions): Promise<void> {
    const byShard = new Map<number, PositionRecord[]>();
    for (const record of records) {
      const shard = this.shardOf(record);
      const list = byShard.get(shard);
      if (list) list.push(record);
      else byShard.set(shard, [record]);
    }
    const whole = byShard.size === 1 && published?.value.records === records ? published : undefined;
    await Promise.all(
      [...byShard].map(async ([shard, list]) => {
        const positions = whole ?? new EncodedPayload(new PositionsMessage(list[0]!.organizationId, list));
        if (this.waiting.has(shard)) return this.wait(shard, positions);
        try {
          await this.log.append(shard, positions);
          this.appended(shard, positions.value.organizationId);
        } catch (error) {
          this.logger.warn({ err: error, shard }, 'handing positions to their owner failed; they wait here for the log to come back');
          this.wait(shard, positions);
        }
      }),
    );
  }

  /** Positions of uploads waiting for the log to take them (Redis down), by shard, oldest first. */
  get waitingRecords(): number {
    return this.waitingCount;
  }

  private wait(shard: number, positions: EncodedPositions): void {
    const queue = this.waiting.get(shard) ?? [];
    queue.push(positions);
    this.waiting.set(shard, queue);
    this.waitingCount += positions.value.records.length;
    while (this.waitingCount > MAX_WAITING_RECORDS) {
      const [oldest, batches] = this.waiting.entries().next().value!;
      const lost = batches.shift()!.value.records.length;
      this.waitingCount -= lost;
      if (batches.length === 0) this.waiting.delete(oldest);
      this.logger.error({ shard: oldest, positions: lost }, 'too many positions waiting for the shard log: oldest dropped from detection (they are stored)');
    }
  }

  /** Appends what waits, shard by shard in order; stops at the first refusal (retried next heartbeat). */
  private async appendWaiting(): Promise<void> {
    for (const [shard, batches] of this.waiting) {
      while (batches.length > 0) {
        try {
          await this.log.append(shard, batches[0]!);
          this.appended(shard, batches[0]!.value.organizationId);
        } catch {
          return;
        }
        this.waitingCount -= batches.shift()!.value.records.length;
      }
      this.waiting.delete(shard);
    }
  }

  /** Joins: the first heartbeat (and the shards it brings) before resolving, then one every `heartbeatMs`. */
  async start(): Promise<void> {
    this.running = true;
    await this.tick();
    const loop = () => {
      this.tickTimer = setTimeout(() => {
        this.ticking = this.tick().finally(() => this.running && loop());
      }, this.options.heartbeatMs);
      this.tickTimer.unref();
    };
    loop();
    this.reading = this.readLoop();
  }

  /** Graceful stop: finishes what is being processed, gives every shard back and leaves at once. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.halt();
    await this.ticking;
    await this.reading;
    await this.settle();
    for (const shard of [...this.held.keys()]) await this.drop(shard, true);
    await Promise.all(this.leaving.values());
    await this.appendWaiting();
    await this.coordination.leave().catch((error) => this.logger.warn({ err: error }, 'leaving the cluster failed; the heartbeat will expire'));
    await this.close();
  }

  /**
   * Stops heartbeats, lease renewals and reading at once and gives nothing back, as a crash would: the other
   * members take over once the heartbeat and the leases expire (failover tests).
   */
  async abandon(): Promise<void> {
    this.halt();
    await this.ticking;
    await this.reading;
    for (const state of this.held.values()) state.validUntil = 0;
    await this.close();
  }

  private halt(): void {
    this.running = false;
    clearTimeout(this.tickTimer);
    clearTimeout(this.pollTimer);
    this.pollTimer = undefined;
    // Uploads waiting for detection go on: stopping is not their fault, and their positions are handed over as usual.
    for (const upload of this.paced) upload.resolve();
    this.behind.clear();
    this.wakeReader?.();
  }

  private async close(): Promise<void> {
    await this.log.close();
    await this.coordination.close();
  }

  private async tick(): Promise<void> {
    const started = Date.now();
    if (this.waiting.size > 0) await this.appendWaiting();
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
    if (!this.running) return;
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
    await this.pollBacklog();
  }

  private take(shard: number, started: number): void {
    const state: HeldShard = { phase: 'starting', validUntil: started + this.options.ttlMs, unacked: [], starting: Promise.resolve() };
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
  private drop(shard: number, release: boolean): Promise<void> {
    const state = this.held.get(shard);
    if (!state) return this.leaving.get(shard) ?? Promise.resolve();
    this.held.delete(shard);
    const leaving = (async () => {
      await state.starting;
      await this.processing;
      this.handler.lose(shard);
      if (release) await this.coordination.release(shard).catch((error) => this.logger.warn({ err: error, shard }, 'releasing a shard lease failed; it will expire'));
    })().finally(() => this.leaving.delete(shard));
    this.leaving.set(shard, leaving);
    return leaving;
  }

  /** Processes entries; they are acknowledged by `settle` once what they caused is stored. */
  private async process(shard: number, state: HeldShard, entries: readonly ShardEntry[]): Promise<void> {
    await this.handler.process(shard, entries, () => this.held.get(shard) === state && this.holds(shard));
    state.unacked.push(...entries.map((entry) => entry.id));
  }

  /**
   * Acknowledges entries processed, once what they caused is stored; runs until nothing more can be (all done,
   * storage refusing: retried after the next read, or the lease lost). Entries processed meanwhile are taken
   * in the next round: only those counted before `stored()` was asked are acknowledged by its answer.
   */
  private settle(): Promise<void> {
    this.settling ??= (async () => {
      for (;;) {
        const rounds = [...this.held].filter(([, state]) => state.unacked.length > 0).map(([shard, state]) => ({ shard, state, count: state.unacked.length }));
        if (rounds.length === 0 || !(await this.handler.stored())) return;
        let acknowledged = 0;
        for (const { shard, state, count } of rounds) acknowledged += await this.acknowledge(shard, state, count);
        if (acknowledged === 0) return;
      }
    })()
      .catch((error) => this.logger.error({ err: error }, 'acknowledging shard entries failed'))
      .finally(() => (this.settling = undefined));
    return this.settling;
  }

  /** Acknowledges the first `count` entries processed, while the lease is still held (a fenced owner acknowledges nothing). */
  private async acknowledge(shard: number, state: HeldShard, count: number): Promise<number> {
    if (count === 0 || this.held.get(shard) !== state || !this.holds(shard)) return 0;
    const ids = state.unacked.splice(0, count);
    try {
      await this.log.ack(shard, ids);
      return ids.length;
    } catch (error) {
      state.unacked.unshift(...ids);
      this.logger.warn({ err: error, shard }, 'acknowledging shard entries failed; retried');
      return 0;
    }
  }

  private async readLoop(): Promise<void> {
    while (this.running) {
      const ready = this.readyShards;
      if (ready.length === 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.options.heartbeatMs);
          this.wakeReader = () => (clearTimeout(timer), resolve());
        });
        this.wakeReader = undefined;
        continue;
      }
      this.processing = this.readRound(ready).catch((error) => this.logger.error({ err: error }, 'processing shard entries failed'));
      await this.processing;
    }
  }

  /** Reads the ready shards' new entries (waiting up to heartbeatMs for one) and processes them. */
  private async readRound(ready: number[]): Promise<void> {
    const blockMs = this.options.heartbeatMs;
    let delivered: Map<number, ShardEntry[]>;
    try {
      delivered = await this.log.read(ready, blockMs);
    } catch (error) {
      if (!this.running) return;
      if (isGroupGone(error)) {
        // Redis lost the streams (a restart): every shard is taken again from storage.
        this.logger.warn('shard streams are gone (Redis restarted?): rebuilding every shard held');
        for (const shard of ready) void this.drop(shard, false);
      } else {
        this.logger.warn({ err: error }, 'reading shard streams failed');
        await new Promise((resolve) => setTimeout(resolve, blockMs));
      }
      return;
    }
    for (const [shard, entries] of delivered) {
      const state = this.held.get(shard);
      // Given up meanwhile: left pending, for the next owner.
      if (!state || !this.holds(shard)) continue;
      try {
        await this.process(shard, state, entries);
      } catch (error) {
        // Left pending: the shard is taken again from storage, which replays them (e.g. after a database outage).
        this.logger.error({ err: error, shard }, 'processing shard entries failed; the shard is taken again');
        void this.drop(shard, false);
      }
    }
    // Acknowledged once stored, while the next reads are detected; past a few reads' worth, storage sets the pace.
    const settling = this.settle();
    let unstored = 0;
    for (const state of this.held.values()) unstored += state.unacked.length;
    if (unstored > MAX_UNSTORED_ENTRIES) await settling;
  }
}
