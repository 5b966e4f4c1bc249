import { decodePayload } from '../../shared/bus/encoded-payload.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { EncodedPositions, PositionsMessage } from '../../shared/positions/positions-message.js';
import type { RedisClient, RedisConnections } from '../../shared/redis/redis-connections.js';
import { ClusterKeys } from './cluster-keys.js';
import { SHARD_READ_COUNT, type ShardBacklog, type ShardEntry, type ShardLog } from './shard-log.js';

const GROUP = 'detection';
/** An entry's one field: the packed PositionsMessage, the very bytes published on the bus when the upload had one shard. */
const FIELD = 'p';
/** The field of entries appended by gateways before 'p' (a packed record array), still read after an upgrade. */
const RECORDS_FIELD = 'r';
/** Entries read per shard at once (shard-log.ts). */
const READ_COUNT = SHARD_READ_COUNT;
/** Entries this member appended to shards it reads, remembered until read back (beyond, they are decoded as others'). */
const MAX_REMEMBERED = 1024;
/** Organizations of entries delivered to this member and not acknowledged yet, at most (past it forgotten: counts then drift up until the shard drains). */
const MAX_DELIVERED = 100_000;

type RawEntry = [Buffer, Buffer[]];
/** ioredis has the command but its typings lack the Buffer variant (msgpack needs the raw bytes). */
interface XAutoClaim {
  xautoclaimBuffer(
    key: string,
    group: string,
    consumer: string,
    minIdleMs: number,
    start: string,
    count: 'COUNT',
    n: number,
  ): Promise<[Buffer, RawEntry[], Buffer[]]>;
}

/**
 * A Redis Stream per shard (keys: cluster-keys.ts) with one consumer group, `detection`, whose consumers are the
 * members (by member id). The group starts at the stream's beginning, so entries appended before any owner
 * opened the shard are read too. After acknowledging, the owner trims the stream up to what it acknowledged
 * (MINID): entries stay in Redis only while they wait for their owner.
 * Blocking reads have a connection of their own, so appends and acknowledgements never wait behind them.
 *
 * On a Redis Cluster each shard's stream is in a slot of its own, and one command may not read streams of several
 * slots: a read asks without blocking (one write per node) the shards that may have new entries, those named by
 * an `appended` message (SPUBLISH, in the append's transaction, on the shard's node) since they were last asked,
 * or whose last answer was full; with none, it waits for such a message. At the end of a read without one, every
 * shard is asked, at most once per longest `blockMs` a read was given (the reader's short reads while other shards
 * are processed do not ask them all each time): a message lost (the subscriber reconnecting) delays an entry by
 * about that much at most.
 *
 * An owner reading back an entry it appended itself takes the records it appended, by entry id, instead of
 * decoding their bytes: the same values, since the bytes were packed from them.
 */
export class RedisShardLog implements ShardLog {
  private readonly commands: RedisClient;
  private readonly keys: ClusterKeys;
  /** One Redis: the blocking reads. A cluster: the sharded subscriber to the `appended` messages of the shards read. */
  private readonly reader: RedisClient;
  private readonly clustered: boolean;
  /** Cluster: the shards whose `appended` messages the reader follows (by channel), and those that may have new entries. */
  private readonly followed = new Map<string, number>();
  private readonly following = new Set<number>();
  private readonly unread = new Set<number>();
  private wake?: () => void;
  /** Cluster: when every shard read was last asked, and the longest `blockMs` a read was given (how often they are). */
  private askedAllAt = 0;
  private askAllEveryMs = 0;
  private closing = false;
  /** Shards of the last read: only their appends are remembered. */
  private reading = new Set<number>();
  /** Records appended to a shard being read, by entry id, in append (so stream) order. */
  private readonly appended = new Map<number, Map<string, PositionRecord[]>>();
  private remembered = 0;
  /** The organization of each entry delivered to this member, by shard and entry id, until acknowledged. */
  private readonly delivered = new Map<number, Map<string, string>>();
  private deliveredCount = 0;

  constructor(
    redis: RedisConnections,
    prefix: string,
    private readonly consumer: string,
  ) {
    this.keys = new ClusterKeys(redis, prefix);
    this.clustered = redis.clustered;
    this.commands = redis.connect({ name: `floorcast-shards-${consumer}`, maxRetriesPerRequest: 2, enableAutoPipelining: true });
    this.reader = redis.connect({ name: `floorcast-shards-read-${consumer}`, maxRetriesPerRequest: 2, subscriber: this.clustered });
    // Errors surface through the commands' rejections; these only keep ioredis from reporting them as unhandled.
    this.commands.on('error', () => undefined);
    this.reader.on('error', () => undefined);
    if (this.clustered) {
      this.reader.on('smessage', (channel: string) => {
        const shard = this.followed.get(channel);
        if (shard === undefined) return;
        this.unread.add(shard);
        this.wake?.();
      });
    }
  }

  private key(shard: number): string {
    return this.keys.shard(shard);
  }

  /** A hash per shard: entries not yet acknowledged, per organization (kept with the stream, in one transaction). */
  private countsKey(shard: number): string {
    return this.keys.shardCounts(shard);
  }

  async append(shard: number, positions: EncodedPositions): Promise<void> {
    const transaction = this.commands
      .multi()
      .xadd(this.key(shard), '*', FIELD, positions.bytes)
      .hincrby(this.countsKey(shard), positions.value.organizationId, 1);
    if (this.clustered) transaction.spublish(this.keys.shardAppended(shard), '');
    const answers = await transaction.exec();
    const [error, added] = answers?.[0] ?? [new Error('the append transaction was discarded')];
    if (error) throw error;
    const id = added as string | null;
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
      const [next, claimed] = await (this.commands as unknown as XAutoClaim).xautoclaimBuffer(
        this.key(shard),
        GROUP,
        this.consumer,
        0,
        cursor,
        'COUNT',
        READ_COUNT,
      );
      cursor = next.toString();
      entries.push(...claimed.map(([id, fields]) => this.deliver(shard, decode(id.toString(), fields))));
    } while (cursor !== '0-0');
    return entries;
  }

  async read(shards: readonly number[], blockMs: number): Promise<Map<number, ShardEntry[]>> {
    this.forgetUnread(shards);
    if (this.clustered) return this.readEachShard(shards, blockMs);
    const delivered = new Map<number, ShardEntry[]>();
    if (shards.length === 0) return delivered;
    const keys = shards.map((shard) => this.key(shard));
    const answer = (await this.reader.xreadgroupBuffer(
      'GROUP',
      GROUP,
      this.consumer,
      'COUNT',
      READ_COUNT,
      'BLOCK',
      blockMs,
      'STREAMS',
      ...keys,
      ...keys.map(() => '>'),
    )) as [Buffer, RawEntry[]][] | null;
    const shardOf = new Map(keys.map((key, index) => [key, shards[index]!]));
    for (const [key, entries] of answer ?? []) {
      const shard = shardOf.get(key.toString());
      if (shard === undefined) continue;
      delivered.set(
        shard,
        entries.map((entry) => this.deliver(shard, this.entry(entry, shard))),
      );
    }
    return delivered;
  }

  /** Redis Cluster: the shards that may have new entries asked without blocking (see the class comment). */
  private async readEachShard(shards: readonly number[], blockMs: number): Promise<Map<number, ShardEntry[]>> {
    await this.follow(shards);
    this.askAllEveryMs = Math.max(this.askAllEveryMs, blockMs);
    const deadline = Date.now() + blockMs;
    const delivered = new Map<number, ShardEntry[]>();
    if (shards.length === 0) return delivered;
    for (;;) {
      // Taken off before asking: a message that comes while the answer is on its way asks again.
      const asked = shards.filter((shard) => this.unread.delete(shard));
      const answers = await Promise.all(
        asked.map(
          (shard) =>
            this.commands.xreadgroupBuffer('GROUP', GROUP, this.consumer, 'COUNT', READ_COUNT, 'STREAMS', this.key(shard), '>') as Promise<
              [Buffer, RawEntry[]][] | null
            >,
        ),
      );
      for (const [index, answer] of answers.entries()) {
        const shard = asked[index]!;
        const entries = answer?.[0]?.[1] ?? [];
        if (entries.length === 0) continue;
        // A full answer may have left more behind.
        if (entries.length >= READ_COUNT) this.unread.add(shard);
        delivered.set(
          shard,
          entries.map((entry) => this.deliver(shard, this.entry(entry, shard))),
        );
      }
      const left = deadline - Date.now();
      if (delivered.size > 0 || left <= 0 || this.closing) return delivered;
      if (
        !shards.some((shard) => this.unread.has(shard)) &&
        !(await this.appendedWithin(left)) &&
        Date.now() - this.askedAllAt >= this.askAllEveryMs
      ) {
        this.askedAllAt = Date.now();
        for (const shard of shards) this.unread.add(shard);
      }
    }
  }

  /** Waits up to `ms` for an `appended` message; false when none came. */
  private appendedWithin(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => ((this.wake = undefined), resolve(false)), ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve(true);
      };
    });
  }

  /** Follows the `appended` messages of exactly these shards (each channel on its shard's node); new ones are asked at once. */
  private async follow(shards: readonly number[]): Promise<void> {
    if (shards.length === this.followed.size && shards.every((shard) => this.following.has(shard))) return;
    const wanted = new Set(shards);
    const added = shards.filter((shard) => !this.following.has(shard));
    const removed = [...this.followed].filter(([, shard]) => !wanted.has(shard));
    for (const [channel, shard] of removed) {
      this.followed.delete(channel);
      this.following.delete(shard);
      this.unread.delete(shard);
    }
    for (const shard of added) {
      this.followed.set(this.keys.shardAppended(shard), shard);
      this.following.add(shard);
    }
    // Asked at once whatever happens: entries may have come before the subscription (or while it failed).
    for (const shard of added) this.unread.add(shard);
    try {
      await Promise.all([
        ...added.map((shard) => this.reader.ssubscribe(this.keys.shardAppended(shard))),
        ...removed.map(([channel]) => this.reader.sunsubscribe(channel)),
      ]);
    } catch (error) {
      // Followed again at the next read.
      for (const shard of added) {
        this.followed.delete(this.keys.shardAppended(shard));
        this.following.delete(shard);
      }
      throw error;
    }
  }

  /** Remembers the organization of an entry delivered here, to count it down when it is acknowledged. */
  private deliver(shard: number, entry: ShardEntry): ShardEntry {
    const organizationId = entry.records[0]?.organizationId;
    if (organizationId === undefined) return entry;
    if (this.deliveredCount >= MAX_DELIVERED) {
      this.delivered.clear();
      this.deliveredCount = 0;
    }
    let ids = this.delivered.get(shard);
    if (!ids) this.delivered.set(shard, (ids = new Map()));
    if (!ids.has(entry.id)) this.deliveredCount += 1;
    ids.set(entry.id, organizationId);
    return entry;
  }

  async ack(shard: number, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    const key = this.key(shard);
    const byOrganization = new Map<string, number>();
    const known = this.delivered.get(shard);
    for (const id of ids) {
      const organizationId = known?.get(id);
      if (organizationId !== undefined) byOrganization.set(organizationId, (byOrganization.get(organizationId) ?? 0) + 1);
    }
    const transaction = this.commands.multi().xack(key, GROUP, ...ids);
    for (const [organizationId, count] of byOrganization) transaction.hincrby(this.countsKey(shard), organizationId, -count);
    const answers = await transaction.exec();
    const failed = answers?.find(([error]) => error)?.[0];
    if (!answers || failed) throw failed ?? new Error('the acknowledgement transaction was discarded');
    for (const id of ids) if (known?.delete(id)) this.deliveredCount -= 1;
    // Entries are acknowledged in order, so everything before the last one is done.
    await this.commands.xtrim(key, 'MINID', '~', ids.at(-1)!);
  }

  /**
   * One write (auto-pipelined; one per node on a cluster, where a pipeline may not span slots): XINFO GROUPS gives
   * the group's pending count and its lag (entries never delivered, Redis 7); where Redis tells no lag (no group
   * yet: nobody opened the shard; Redis 6; a lag it cannot tell), XLEN stands in for both. A stream that does not
   * exist holds nothing.
   */
  async backlog(shards: readonly number[]): Promise<number[]> {
    if (shards.length === 0) return [];
    const answers = await Promise.all(
      shards.map((shard) =>
        Promise.allSettled([this.commands.xinfo('GROUPS', this.key(shard)) as Promise<unknown[][]>, this.commands.xlen(this.key(shard))]),
      ),
    );
    return answers.map(([groupsAnswer, lengthAnswer]) => {
      if (groupsAnswer.status === 'rejected') return 0;
      const groups = groupsAnswer.value;
      const length = lengthAnswer.status === 'fulfilled' ? lengthAnswer.value : 0;
      const group = (groups as unknown[][]).map(fieldsOf).find((fields) => fields.get('name') === GROUP);
      if (!group) return length;
      const lag = group.get('lag');
      // XLEN counts the pending entries too (and a few acknowledged ones not trimmed yet): an upper bound.
      return typeof lag === 'number' ? Number(group.get('pending') ?? 0) + lag : length;
    });
  }

  /**
   * The backlog as `backlog` reads it, with each organization's share from the shard's counts. A shard with no
   * backlog left has no share either: its counts are reset then (they may have drifted, e.g. after a member that
   * delivered entries died and forgot their organizations).
   */
  async organizationBacklog(shards: readonly number[]): Promise<ShardBacklog[]> {
    if (shards.length === 0) return [];
    const [totals, answers] = await Promise.all([
      this.backlog(shards),
      Promise.allSettled(shards.map((shard) => this.commands.hgetall(this.countsKey(shard)))),
    ]);
    const drained: number[] = [];
    const backlogs = shards.map((shard, index) => {
      const total = totals[index]!;
      const organizations = new Map<string, number>();
      const answer = answers[index]!;
      const counts = answer.status === 'fulfilled' ? answer.value : undefined;
      if (total === 0) {
        if (counts && Object.keys(counts).length > 0) drained.push(shard);
        return { total, organizations };
      }
      for (const [organizationId, count] of Object.entries(counts ?? {})) {
        if (Number(count) > 0) organizations.set(organizationId, Number(count));
      }
      return { total, organizations };
    });
    await Promise.all(drained.map((shard) => this.commands.del(this.countsKey(shard)).catch(() => undefined)));
    return backlogs;
  }

  async close(): Promise<void> {
    // A blocked read holds nothing worth waiting for; appends and acknowledgements under way are.
    this.closing = true;
    this.wake?.();
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
