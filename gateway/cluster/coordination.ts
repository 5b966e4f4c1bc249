/**
 * Who is alive and who holds which shard. A member's heartbeat and each shard's lease expire on their own
 * (TTL) unless renewed, so a member that dies stops counting and loses its shards by itself, without anyone
 * having to notice; a member that stops gracefully gives them back at once (`release`, `leave`).
 * Drivers: `LocalCoordination` (embedded mode: one member, every lease its own) and `RedisCoordination`.
 */
export interface Coordination {
  readonly memberId: string;
  /** Refreshes this member's heartbeat; resolves to the live members (this one included), sorted. */
  heartbeat(): Promise<string[]>;
  /** Takes a shard's lease if nobody holds it (or this member already does); true when it is held now. */
  acquire(shard: number): Promise<boolean>;
  /** Extends leases this member holds: for each shard, whether it is still this member's. */
  renew(shards: readonly number[]): Promise<boolean[]>;
  /** Gives a lease back at once (when it is still this member's). */
  release(shard: number): Promise<void>;
  /** Stops counting as a member at once (graceful stop). */
  leave(): Promise<void>;
  close(): Promise<void>;
}

/** Embedded mode: this process is the only member and holds every lease. */
export class LocalCoordination implements Coordination {
  constructor(readonly memberId: string) {}

  async heartbeat(): Promise<string[]> {
    return [this.memberId];
  }

  async acquire(): Promise<boolean> {
    return true;
  }

  async renew(shards: readonly number[]): Promise<boolean[]> {
    return shards.map(() => true);
  }

  async release(): Promise<void> {}

  async leave(): Promise<void> {}

  async close(): Promise<void> {}
}
