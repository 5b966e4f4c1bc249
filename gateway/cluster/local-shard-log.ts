import type { EncodedPositions } from '../../shared/positions/positions-message.js';
import { SHARD_READ_COUNT, type ShardBacklog, type ShardEntry, type ShardLog } from './shard-log.js';

interface LocalShard {
  waiting: ShardEntry[];
  pending: ShardEntry[];
}

/**
 * Embedded mode's shard log: an in-process ordered queue per shard, with the same delivery rules as the Redis
 * stream (delivered entries stay pending until acknowledged). The single member of an embedded gateway is
 * always the owner, so nothing here outlives the process, as nothing else in it does.
 */
export class LocalShardLog implements ShardLog {
  private readonly shards = new Map<number, LocalShard>();
  private sequence = 0;
  private wake?: () => void;
  private closed = false;

  private shard(shard: number): LocalShard {
    let state = this.shards.get(shard);
    if (!state) this.shards.set(shard, (state = { waiting: [], pending: [] }));
    return state;
  }

  /** Never packs the positions: the owner is this process. */
  async append(shard: number, positions: EncodedPositions): Promise<void> {
    if (this.closed) throw new Error('shard log is closed');
    this.shard(shard).waiting.push({ id: String(++this.sequence), records: positions.value.records });
    this.wake?.();
  }

  async open(): Promise<void> {}

  async takePending(shard: number): Promise<ShardEntry[]> {
    return [...this.shard(shard).pending];
  }

  async read(shards: readonly number[], blockMs: number): Promise<Map<number, ShardEntry[]>> {
    if (!this.closed && !shards.some((shard) => this.shard(shard).waiting.length > 0)) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => ((this.wake = undefined), resolve()), blockMs);
        this.wake = () => (clearTimeout(timer), (this.wake = undefined), resolve());
      });
    }
    const delivered = new Map<number, ShardEntry[]>();
    for (const shard of shards) {
      const state = this.shard(shard);
      if (state.waiting.length === 0) continue;
      // A few at a time, as from Redis: a long backlog of one shard is read in rounds, the other shards' between.
      const entries = state.waiting.splice(0, SHARD_READ_COUNT);
      state.pending.push(...entries);
      delivered.set(shard, entries);
    }
    return delivered;
  }

  async ack(shard: number, ids: readonly string[]): Promise<void> {
    const done = new Set(ids);
    const state = this.shard(shard);
    state.pending = state.pending.filter((entry) => !done.has(entry.id));
  }

  async backlog(shards: readonly number[]): Promise<number[]> {
    return shards.map((shard) => {
      const state = this.shards.get(shard);
      return state ? state.waiting.length + state.pending.length : 0;
    });
  }

  async organizationBacklog(shards: readonly number[]): Promise<ShardBacklog[]> {
    return shards.map((shard) => {
      const state = this.shards.get(shard);
      const organizations = new Map<string, number>();
      for (const entry of state ? [...state.waiting, ...state.pending] : []) {
        const organizationId = entry.records[0]?.organizationId;
        if (organizationId !== undefined) organizations.set(organizationId, (organizations.get(organizationId) ?? 0) + 1);
      }
      return { total: state ? state.waiting.length + state.pending.length : 0, organizations };
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wake?.();
  }
}
