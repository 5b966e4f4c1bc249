import { Redis } from 'ioredis';
import { decodePayload } from '../../shared/bus/encoded-payload.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { EncodedPositions, PositionsMessage } from '../../shared/positions/positions-message.js';
import type { ShardEntry, ShardLog } from './shard-log.js';

const GROUP = 'detection';
/** An entry's one field: the packed PositionsMessage, the very bytes published on the bus when the upload had one shard. */
const FIELD = 'p';
/** The field of entries appended by gateways before 'p' (a packed record array), still read after an upgrade. */
const RECORDS_FIELD = 'r';
/** Entries read per shard at once: a few uploads' worth (each is one upload), so a backlog is processed in short steps
 * that never hold the event loop long enough to miss a lease renewal (CLUSTER_HEARTBEAT_MS). */
const READ_COUNT = 16;
/** Entries this member appended to shards it reads, remembered until read back (beyond, they are decoded as others'). */
const MAX_REMEMBERED = 1024;

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
 *
 * An owner reading back an entry it appended itself takes the records it appended, by entry id, instead of
 * decoding their bytes: the same values, since the bytes were packed from them.
 */
export class RedisShardLog implements ShardLog {
  private readonly commands: Redis;
  private readonly reader: Redis;
  private readonly keyPrefix: string;
  /** Shards of the last read: only their appends are remembered. */
  private reading = new Set<number>();
  /** Records appended to a shard being read, by entry id, in append (so stream) order. */
  private readonly appended = new Map<number, Map<string, PositionRecord[]>>();
  private remembered = 0;

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

  async append(shard: number, positions: EncodedPositions): Promise<void> {
    const id = await this.commands.xadd(this.key(shard), '*', FIELD, positions.bytes);
    if (id === null || !this.reading.has(shard) || this.remembered >= MAX_REMEMBERED) return;
    let ids = this.appended.get(shard);
    if (!ids) this.appended.set(shard, (ids = new Map()));
    ids.set(id, positions.value.records);
    this.remembered += 1;
  }

  /** The records of an entry: remembered if this member appended it, decoded otherwise. */
  private entry([rawId, fields]: RawEntry, shard: number): ShardEntry {
    const id = rawId.toString();
    const ids = this.appended.get(shard);
    const records = ids?.get(id);
    if (!ids || !records) return decode(id, fields);
    // Appends resolve in stream order: those before this one were read already or went to another member.
    for (const earlier of ids.keys()) {
      ids.delete(earlier);
      this.remembered -= 1;
      if (earlier === id) break;
    }
    return { id, records };
  }

  private forgetUnread(shards: readonly number[]): void {
    this.reading = new Set(shards);
    for (const [shard, ids] of this.appended) {
      if (this.reading.has(shard)) continue;
      this.remembered -= ids.size;
      this.appended.delete(shard);
    }
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
      entries.push(...claimed.map(([id, fields]) => decode(id.toString(), fields)));
    } while (cursor !== '0-0');
    return entries;
  }

  async read(shards: readonly number[], blockMs: number): Promise<Map<number, ShardEntry[]>> {
    const delivered = new Map<number, ShardEntry[]>();
    this.forgetUnread(shards);
    if (shards.length === 0) return delivered;
    const keys = shards.map((shard) => this.key(shard));
    const answer = (await this.reader.xreadgroupBuffer(
      'GROUP', GROUP, this.consumer, 'COUNT', READ_COUNT, 'BLOCK', blockMs, 'STREAMS', ...keys, ...keys.map(() => '>'),
    )) as [Buffer, RawEntry[]][] | null;
    for (const [key, entries] of answer ?? []) {
      const shard = Number(key.toString().slice(this.keyPrefix.length));
      delivered.set(shard, entries.map((entry) => this.entry(entry, shard)));
    }
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

function decode(id: string, fields: Buffer[]): ShardEntry {
  for (let at = 0; at + 1 < fields.length; at += 2) {
    const name = fields[at]!.toString();
    if (name === FIELD) return { id, records: (decodePayload(fields[at + 1]!) as PositionsMessage).records };
    if (name === RECORDS_FIELD) return { id, records: decodePayload(fields[at + 1]!) as PositionRecord[] };
  }
  return { id, records: [] };
}
