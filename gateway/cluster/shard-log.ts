import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { EncodedPositions } from '../../shared/positions/positions-message.js';

/**
 * Entries read per shard at once, by every driver: a few uploads' worth (each is one upload), so a backlog is
 * processed in short rounds that never hold the event loop long enough to miss a lease renewal
 * (CLUSTER_HEARTBEAT_MS), and a tenant's long backlog in one shard is read a few uploads at a time: the other
 * shards' new entries (another tenant's) are read between, not after all of it.
 */
export const SHARD_READ_COUNT = 16;

/** One appended batch of a shard: the positions of one upload that fall in this shard, in upload order. */
export interface ShardEntry {
  id: string;
  records: PositionRecord[];
}

/** A shard's entries not yet acknowledged: all of them, and by organization (those with none left out). */
export interface ShardBacklog {
  total: number;
  organizations: Map<string, number>;
}

/**
 * The durable, ordered hand-off of positions from the gateway that accepted them to the owner of their shard.
 * An entry stays until acknowledged: an owner that dies before acknowledging leaves it pending, and the next
 * owner gets it again from `takePending` before anything new. Drivers: `LocalShardLog` (one process, embedded
 * mode) and `RedisShardLog` (a Redis Stream per shard with one consumer group).
 */
export interface ShardLog {
  /**
   * Appends one entry, the positions of one upload in this shard; resolves once it is durable (in Redis, or in
   * this process's queue). Their bytes are packed at most once: those the bus published, if it did.
   */
  append(shard: number, positions: EncodedPositions): Promise<void>;
  /** Prepares a shard this member is starting to consume (creates the Redis consumer group). */
  open(shard: number): Promise<void>;
  /** Every entry delivered before and not acknowledged, whoever it was delivered to, now delivered to this member, in order. */
  takePending(shard: number): Promise<ShardEntry[]>;
  /** Entries never delivered yet, at most SHARD_READ_COUNT per shard, of any of these shards, waiting up to `blockMs` for one to come. */
  read(shards: readonly number[], blockMs: number): Promise<Map<number, ShardEntry[]>>;
  /** Marks entries processed (their detections stored); they are not delivered again, and memory is freed. */
  ack(shard: number, ids: readonly string[]): Promise<void>;
  /** Entries appended and not yet acknowledged (never delivered, or delivered and pending), per shard asked, in order. */
  backlog(shards: readonly number[]): Promise<number[]>;
  /**
   * The same backlog per shard asked, in order, with its share per organization (what uploads are paced by:
   * one tenant's backlog never holds another's uploads).
   */
  organizationBacklog(shards: readonly number[]): Promise<ShardBacklog[]>;
  close(): Promise<void>;
}

/** The log answered that a shard's stream or consumer group is gone: Redis restarted (or was flushed). */
export const isGroupGone = (error: unknown): boolean => error instanceof Error && /NOGROUP/.test(error.message);
