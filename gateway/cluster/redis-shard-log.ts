import { Redis } from 'ioredis';
import { Packr } from 'msgpackr';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { ShardEntry, ShardLog } from './shard-log.js';

const GROUP = 'detection';
const FIELD = 'r';
/** Entries read per shard at once: a few uploads' worth (each is one upload), so a backlog is processed in short steps
 * that never hold the event loop long enough to miss a lease renewal (CLUSTER_HEARTBEAT_MS). */
const READ_COUNT = 16;
const packr = new Packr({ useRecords: true });

type RawEntry = [Buffer, Buffer[]];
/** ioredis has the command but its typings lack the Buffer variant (msgpack needs the raw bytes). */
interface XAutoClaim {
  xautoclaimBuffer(key: string, group: string, consumer: string, minIdleMs: number, start: string, count: 'COUNT', n: number): Promise<[Buffer, RawEntry[], Buffer[]]>;
}

/**
 * A Redis Stream per shard (`<prefix>:cluster:shard:<n>`) with one consumer group, `detection`, whose consumers
 * are the members (by member id). The group starts at the stream's beginning, so entries appended before any
 * owner opened the shard are read too. After acknowledging, the owner trims the stream up to what it
 * acknowledged (MINID): entries stay in Redis only while they wait for their owner.
 * Blocking reads have a connection of their own, so appends and acknowledgements never wait behind them.
 */
export class RedisShardLog implements ShardLog {
  private readonly commands: Redis;
  private readonly reader: Redis;
  private readonly keyPrefix: string;

  constructor(url: string, prefix: string, private readonly consumer: string) {
    this.keyPrefix = `${prefix}:cluster:shard:`;
    const options = { maxRetriesPerRequest: 2, enableOfflineQueue: true } as const;
    this.commands = new Redis(url, { ...options, enableAutoPipelining: true, connectionName: `floorcast-shards-${consumer}` });
    this.reader = new Redis(url, { ...options, connectionName: `floorcast-shards-read-${consumer}` });
    // Errors surface through the commands' rejections; these only keep ioredis from reporting them as unhandled.
    this.commands.on('error', () => undefined);
    this.reader.on('error', () => undefined);
  }

  private key(shard: number): string {
    return this.keyPrefix + shard;
  }

  async append(shard: number, records: readonly PositionRecord[]): Promise<void> {
    await this.commands.xadd(this.key(shard), '*', FIELD, packr.pack(records));
  }

  async open(shard: number): Promise<void> {
    try {
      await this.commands.xgroup('CREATE', this.key(shard), GROUP, '0', 'MKSTREAM');
    } catch (error) {
      if (!(error instanceof Error && /BUSYGROUP/.test(error.message))) throw error;
    }
  }

  async takePending(shard: number): Promise<ShardEntry[]> {
    const entries: ShardEntry[] = [];
    let cursor = '0-0';
    do {
      const [next, claimed] = await (this.commands as unknown as XAutoClaim).xautoclaimBuffer(this.key(shard), GROUP, this.consumer, 0, cursor, 'COUNT', READ_COUNT);
      cursor = next.toString();
      entries.push(...claimed.map(decode));
    } while (cursor !== '0-0');
    return entries;
  }

  async read(shards: readonly number[], blockMs: number): Promise<Map<number, ShardEntry[]>> {
    const delivered = new Map<number, ShardEntry[]>();
    if (shards.length === 0) return delivered;
    const keys = shards.map((shard) => this.key(shard));
    const answer = (await this.reader.xreadgroupBuffer(
      'GROUP', GROUP, this.consumer, 'COUNT', READ_COUNT, 'BLOCK', blockMs, 'STREAMS', ...keys, ...keys.map(() => '>'),
    )) as [Buffer, RawEntry[]][] | null;
    for (const [key, entries] of answer ?? []) delivered.set(Number(key.toString().slice(this.keyPrefix.length)), entries.map(decode));
    return delivered;
  }

  async ack(shard: number, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    const key = this.key(shard);
    await this.commands.xack(key, GROUP, ...ids);
    // Entries are acknowledged in order, so everything before the last one is done.
    await this.commands.xtrim(key, 'MINID', '~', ids.at(-1)!);
  }

  /**
   * One pipeline: XINFO GROUPS gives the group's pending count and its lag (entries never delivered, Redis 7);
   * where Redis tells no lag (no group yet: nobody opened the shard; Redis 6; a lag it cannot tell), XLEN
   * stands in for both. A stream that does not exist holds nothing.
   */
  async backlog(shards: readonly number[]): Promise<number[]> {
    if (shards.length === 0) return [];
    const pipeline = this.commands.pipeline();
    for (const shard of shards) pipeline.xinfo('GROUPS', this.key(shard)).xlen(this.key(shard));
    const answers = (await pipeline.exec()) ?? [];
    return shards.map((_, index) => {
      const [groupsError, groups] = answers[2 * index] ?? [];
      const [, length] = answers[2 * index + 1] ?? [];
      if (groupsError) return 0;
      const group = (groups as unknown[][]).map(fieldsOf).find((fields) => fields.get('name') === GROUP);
      if (!group) return Number(length ?? 0);
      const lag = group.get('lag');
      // XLEN counts the pending entries too (and a few acknowledged ones not trimmed yet): an upper bound.
      return typeof lag === 'number' ? Number(group.get('pending') ?? 0) + lag : Number(length ?? 0);
    });
  }

  async close(): Promise<void> {
    // A blocked read holds nothing worth waiting for; appends and acknowledgements under way are.
    this.reader.disconnect();
    await Promise.race([this.commands.quit().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
    this.commands.disconnect();
  }
}

/** A flat [name, value, name, value...] reply as a map. */
function fieldsOf(reply: unknown[]): Map<string, unknown> {
  const fields = new Map<string, unknown>();
  for (let index = 0; index + 1 < reply.length; index += 2) fields.set(String(reply[index]), reply[index + 1]);
  return fields;
}

function decode([id, fields]: RawEntry): ShardEntry {
  const value = fields[fields.findIndex((field) => field.toString() === FIELD) + 1];
  return { id: id.toString(), records: value ? (packr.unpack(value) as PositionRecord[]) : [] };
}
