/** The owner's side of a shard: what a member does with the shards it gains, processes and loses. */
import type { ShardEntry } from './shard-log.js';

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
  /**
   * Stores what waits, or what waits of `organizations`; resolves to true once nothing (of theirs) does: entries of
   * theirs processed before may then be acknowledged.
   */
  stored(organizations?: ReadonlySet<string>): Promise<boolean>;
  /** Buildings known in a held shard (metrics). */
  buildingsIn(shard: number): number;
}
