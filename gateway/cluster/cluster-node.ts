/**
 * One member of the cluster of gateways, composed of its parts: membership and leases (shard-leases.ts), pacing
 * (pacing.ts), the outage buffer (outage-buffer.ts) and the shard read loop (shard-reader.ts). It runs the
 * heartbeat that drives them and is the pipeline's hand-off of accepted positions to their owners.
 */
import { EncodedPayload } from '../../shared/bus/encoded-payload.js';
import type { Logger } from '../../shared/logger.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { PositionsMessage, type EncodedPositions } from '../../shared/positions/positions-message.js';
import type { PositionHandOff } from '../pipeline/ports.js';
import type { Coordination } from './coordination.js';
import { OutageBuffer } from './outage-buffer.js';
import { Pacing, type PacingOptions } from './pacing.js';
import { positionsByShard, shardOfBuilding, shardOfPosition } from './rendezvous.js';
import type { ShardHandler } from './shard-handler.js';
import { ShardLeases } from './shard-leases.js';
import type { ShardLog } from './shard-log.js';
import { ShardReader } from './shard-reader.js';

export interface ClusterOptions {
  shards: number;
  heartbeatMs: number;
  /** Lifetime of a heartbeat and of a lease without renewal. */
  ttlMs: number;
  /** Per-organization backlog admission of uploads (pacing.ts); none: never paced. */
  pacing?: PacingOptions;
}

/**
 * Every heartbeat this member appends what the outage buffer holds, refreshes its membership, computes the shards
 * it should own (rendezvous hashing over the live members), renews the leases it holds, gives back the shards it
 * should no longer own and tries to take the ones it should, then reads the shards' backlog for pacing. A taken
 * shard is rebuilt from storage, its entries left pending by the previous owner are processed, then new entries
 * are read live.
 */
export class ClusterNode implements PositionHandOff {
  private running = false;
  private tickTimer?: NodeJS.Timeout;
  private ticking?: Promise<void>;
  private readonly leases: ShardLeases;
  private readonly pacing: Pacing;
  private readonly buffer: OutageBuffer;
  private readonly reader: ShardReader;

  constructor(
    private readonly coordination: Coordination,
    private readonly log: ShardLog,
    private readonly handler: ShardHandler,
    private readonly options: ClusterOptions,
    private readonly logger: Logger,
  ) {
    const running = () => this.running;
    this.leases = new ShardLeases(coordination, log, handler, options, logger);
    this.pacing = new Pacing(log, options.pacing, running, logger);
    this.buffer = new OutageBuffer(async (shard, positions) => {
      await log.append(shard, positions);
      this.pacing.appended(shard, positions.value.organizationId);
    }, logger);
    this.reader = new ShardReader(log, handler, this.leases, options.heartbeatMs, running, logger);
  }

  get memberId(): string {
    return this.leases.memberId;
  }

  /** Live members as of the last heartbeat. */
  get liveMembers(): readonly string[] {
    return this.leases.liveMembers;
  }

  /** Shards whose lease this member holds (starting or ready). */
  get heldShards(): number[] {
    return this.leases.heldShards;
  }

  /** Shards rebuilt and read live. */
  get readyShards(): number[] {
    return this.leases.readyShards;
  }

  /** What /metrics reports of the cluster as this member sees it; `backlog`: the largest backlog of a shard it appended to. */
  view(): { members: number; ownedBuildings: number; readyBuildings: number; backlog: number } {
    const count = (shards: number[]) => shards.reduce((total, shard) => total + this.handler.buildingsIn(shard), 0);
    return {
      members: this.liveMembers.length,
      ownedBuildings: count(this.heldShards),
      readyBuildings: count(this.readyShards),
      backlog: this.pacing.largestBacklog,
    };
  }

  /** Paces uploads to detection, before they are stored, by their organization's backlog in their shards (pacing.ts). */
  admit(records: readonly PositionRecord[]): Promise<void> | undefined {
    return this.pacing.admit(records, (record) => this.shardOf(record));
  }

  /** Whether this member owns the building's detection now (`null`, no building: nobody else could). */
  ownsBuilding(buildingId: number | null): boolean {
    return buildingId === null || this.holds(shardOfBuilding(buildingId, this.options.shards));
  }

  shardOf(record: Pick<PositionRecord, 'buildingId' | 'organizationId' | 'deviceId'>): number {
    return shardOfPosition(record, this.options.shards);
  }

  /** Whether this member holds the shard's lease now (the fence of everything it emits for the shard). */
  holds(shard: number): boolean {
    return this.leases.holds(shard);
  }

  /**
   * Hands accepted (committed) positions to the owners of their shards. Never rejects: while the log refuses
   * (Redis down), a shard's batches wait in the outage buffer, in order, and are appended by the next heartbeats
   * once it is back; later batches of that shard queue behind them. So an upload is acknowledged whatever Redis
   * does, as its positions are stored; only a crash of this gateway during a Redis outage loses what waits there
   * (its positions stay stored, and the owner's rebuild reads them).
   *
   * `published`: the same records as the bus published them, grouped by shard the same way (positionsByShard, each
   * shard's on its own channel): a shard's entry is the bytes published for it, neither grouped nor packed again.
   */
  async handOff(records: readonly PositionRecord[], published?: ReadonlyMap<number, EncodedPositions>): Promise<void> {
    await Promise.all(
      [...this.byShard(records, published)].map(async ([shard, positions]) => {
        if (this.buffer.holds(shard)) return this.buffer.add(shard, positions);
        try {
          await this.log.append(shard, positions);
          this.pacing.appended(shard, positions.value.organizationId);
        } catch (error) {
          this.logger.warn({ err: error, shard }, 'handing positions to their owner failed; they wait here for the log to come back');
          this.buffer.add(shard, positions);
        }
      }),
    );
  }

  /** The records by shard, packed: as published when the bus published all of them, grouped and packed here otherwise. */
  private byShard(
    records: readonly PositionRecord[],
    published?: ReadonlyMap<number, EncodedPositions>,
  ): ReadonlyMap<number, EncodedPositions> {
    let count = 0;
    for (const positions of published?.values() ?? []) count += positions.value.records.length;
    if (published && count === records.length) return published;
    const packed = new Map<number, EncodedPositions>();
    for (const [shard, list] of positionsByShard(records, this.options.shards))
      packed.set(shard, new EncodedPayload(new PositionsMessage(list[0]!.organizationId, list)));
    return packed;
  }

  /** Positions of uploads waiting for the log to take them (Redis down). */
  get waitingRecords(): number {
    return this.buffer.records;
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
    this.reader.start();
  }

  /** Graceful stop: finishes what is being processed, gives every shard back and leaves at once. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.halt();
    await this.ticking;
    await this.reader.stopped();
    await this.reader.settle();
    await this.leases.releaseAll();
    await this.buffer.flush();
    await this.coordination
      .leave()
      .catch((error) => this.logger.warn({ err: error }, 'leaving the cluster failed; the heartbeat will expire'));
    await this.close();
  }

  /**
   * Stops heartbeats, lease renewals and reading at once and gives nothing back, as a crash would: the other
   * members take over once the heartbeat and the leases expire (failover tests).
   */
  async abandon(): Promise<void> {
    this.halt();
    await this.ticking;
    await this.reader.stopped();
    this.leases.lapseAll();
    await this.close();
  }

  private halt(): void {
    this.running = false;
    clearTimeout(this.tickTimer);
    this.pacing.halt();
    this.leases.wake();
  }

  private async close(): Promise<void> {
    await this.log.close();
    await this.coordination.close();
  }

  private async tick(): Promise<void> {
    const started = Date.now();
    if (!this.buffer.empty) await this.buffer.flush();
    await this.leases.renew(started);
    if (!this.running) return;
    await this.leases.rebalance(started);
    await this.pacing.poll();
  }
}
