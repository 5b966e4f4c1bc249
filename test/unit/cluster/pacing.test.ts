import { afterEach, describe, expect, it } from 'vitest';
import { ClusterNode } from '../../../gateway/cluster/cluster-node.js';
import type { ShardHandler } from '../../../gateway/cluster/shard-handler.js';
import { LocalCoordination } from '../../../gateway/cluster/coordination.js';
import { LocalShardLog } from '../../../gateway/cluster/local-shard-log.js';
import { shardOfBuilding } from '../../../gateway/cluster/rendezvous.js';
import { DetectionBehindError, errorHeaders, toErrorBody } from '../../../shared/errors.js';
import { createLogger } from '../../../shared/logger.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SHARDS = 4;
const record = (buildingId: number, deviceId = 'd', organizationId = 'org') => ({
  organizationId,
  deviceId,
  userId: null,
  buildingId,
  floorId: 1,
  indoor: true,
  x: 1,
  y: 1,
  lat: 0,
  lng: 0,
  yaw: 0,
  accuracy: null,
  timestamp: 1,
  receivedAt: 1,
});
/** Two buildings of different shards. */
const slow = 1;
const other = [2, 3, 4, 5, 6, 7, 8].find((building) => shardOfBuilding(building, SHARDS) !== shardOfBuilding(slow, SHARDS))!;

/** An owner whose detection of the slow building's shard holds until `release()`. */
function gatedHandler() {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const handler: ShardHandler = {
    gain: async () => undefined,
    lose: () => undefined,
    process: async (shard) => {
      if (shard === shardOfBuilding(slow, SHARDS)) await gate;
      return true;
    },
    stored: async () => true,
    buildingsIn: () => 0,
  };
  return { handler, release: () => open() };
}

/** A log that refuses everything while `down`, as Redis out of reach. */
class UnreachableLog extends LocalShardLog {
  down = false;
  override async append(...args: Parameters<LocalShardLog['append']>) {
    if (this.down) throw new Error('log out of reach');
    return super.append(...args);
  }
  override async backlog(shards: readonly number[]) {
    if (this.down) throw new Error('log out of reach');
    return super.backlog(shards);
  }
  override async organizationBacklog(shards: readonly number[]) {
    if (this.down) throw new Error('log out of reach');
    return super.organizationBacklog(shards);
  }
}

/** Whether a promise is still pending after `ms`. */
async function pendingAfter(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await sleep(ms);
  return !settled;
}

describe('ClusterNode: uploads paced by their shard’s backlog', () => {
  let node: ClusterNode | undefined;
  let release: (() => void) | undefined;
  afterEach(async () => {
    release?.();
    await node?.stop();
    node = undefined;
  });

  async function started(pacing: { maxBacklog: number; waitMs: number } | undefined, log = new LocalShardLog()) {
    const gated = gatedHandler();
    release = gated.release;
    node = new ClusterNode(
      new LocalCoordination('only'),
      log,
      gated.handler,
      { shards: SHARDS, heartbeatMs: 50, ttlMs: 500, pacing },
      createLogger('silent'),
    );
    await node.start();
    for (let attempt = 0; attempt < 100 && node.readyShards.length < SHARDS; attempt++) await sleep(10);
    return node;
  }

  it('lets uploads through at once while the backlog is under the bound, without a round trip', async () => {
    const cluster = await started({ maxBacklog: 3, waitMs: 5000 });
    await cluster.handOff([record(slow)]);
    await cluster.handOff([record(slow)]);
    expect(cluster.view().backlog).toBe(2);
    expect(cluster.admit([record(slow)])).toBeUndefined();
  });

  it('holds uploads to a shard at its bound until the owner catches up; other shards’ uploads go on', async () => {
    const cluster = await started({ maxBacklog: 3, waitMs: 10_000 });
    for (let upload = 0; upload < 3; upload++) await cluster.handOff([record(slow, `d${upload}`)]);
    expect(cluster.view().backlog).toBe(3);
    const waiting = cluster.admit([record(other), record(slow)]);
    expect(waiting).toBeInstanceOf(Promise);
    expect(cluster.admit([record(other)])).toBeUndefined();
    expect(await pendingAfter(waiting!, 300)).toBe(true);
    release!(); // the owner processes and acknowledges the three entries
    await waiting;
    // Let through once under the bound (the first entry acknowledged); the other two follow at the shard's next read.
    for (let attempt = 0; attempt < 100 && cluster.view().backlog > 0; attempt++) await sleep(10);
    expect(cluster.view().backlog).toBe(0);
    expect(cluster.admit([record(slow)])).toBeUndefined();
  });

  it("paces per organization: a tenant at its bound in a shard never holds another tenant's uploads to that shard (issue 28 item 6)", async () => {
    const cluster = await started({ maxBacklog: 3, waitMs: 10_000 });
    // Tenant A floods the slow building's shard; tenant B has a building in the very same shard.
    for (let upload = 0; upload < 10; upload++) await cluster.handOff([record(slow, `a${upload}`, 'tenant-a')]);
    expect(cluster.view().backlog).toBe(10);
    const held = cluster.admit([record(slow, 'a-more', 'tenant-a')]);
    expect(held).toBeInstanceOf(Promise);
    // B is never paced by A's backlog: not on this gateway's own count, nor once the backlog is read from the log.
    for (let upload = 0; upload < 2; upload++) {
      expect(cluster.admit([record(slow, `b${upload}`, 'tenant-b')])).toBeUndefined();
      await cluster.handOff([record(slow, `b${upload}`, 'tenant-b')]);
    }
    await sleep(300); // several backlog polls
    expect(cluster.admit([record(slow, 'b-more', 'tenant-b')])).toBeUndefined();
    expect(await pendingAfter(held!, 50)).toBe(true);
    // B reaching its own bound is paced like anyone.
    await cluster.handOff([record(slow, 'b2', 'tenant-b')]);
    expect(cluster.admit([record(slow, 'b3', 'tenant-b')])).toBeInstanceOf(Promise);
    release!();
    await held;
  });

  it('reads the backlog at once when its own count reaches the bound, so an organization whose detection keeps up is not held (issue 28)', async () => {
    const log = new LocalShardLog();
    const cluster = await started({ maxBacklog: 3, waitMs: 10_000 }, log);
    const shard = shardOfBuilding(other, SHARDS);
    for (let upload = 0; upload < 3; upload++) {
      await cluster.handOff([record(other, `d${upload}`)]);
      // The owner detects and acknowledges each entry before the next upload, as for a tenant whose detection keeps up.
      for (let attempt = 0; attempt < 200; attempt++) {
        const [counts] = await log.organizationBacklog([shard]);
        if (counts!.total === 0) break;
        await sleep(5);
      }
    }
    const [counts] = await log.organizationBacklog([shard]);
    expect(counts!.total).toBe(0);
    // This gateway counted three appends since its last read, which is the bound; the read it starts at once says
    // nothing is left, and the next upload goes through without waiting for the next poll.
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(cluster.admit([record(other, 'next')])).toBeUndefined();
  });

  it('refuses an upload with 503 and Retry-After when its shard stays at the bound through the wait', async () => {
    const cluster = await started({ maxBacklog: 2, waitMs: 200 });
    await cluster.handOff([record(slow, 'a')]);
    await cluster.handOff([record(slow, 'b')]);
    const refused = await cluster.admit([record(slow, 'c')])!.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(DetectionBehindError);
    expect(toErrorBody(refused)).toMatchObject({ status: 503, code: 'unavailable' });
    expect(Number(errorHeaders(refused)['retry-after'])).toBeGreaterThan(0);
  });

  it('lets uploads through while the log is out of reach (their positions are stored, their hand-offs wait here), and paces again once it answers', async () => {
    const log = new UnreachableLog();
    const cluster = await started({ maxBacklog: 2, waitMs: 2_000 }, log);
    await cluster.handOff([record(slow, 'a')]);
    await cluster.handOff([record(slow, 'b')]);
    const held = cluster.admit([record(slow, 'c')]);
    expect(held).toBeInstanceOf(Promise);
    // Redis goes away: the backlog cannot be read, and cannot grow (appends wait in this gateway, bounded).
    log.down = true;
    await held;
    await cluster.handOff([record(slow, 'c')]);
    expect(cluster.waitingRecords).toBe(1);
    expect(cluster.admit([record(slow, 'd')])).toBeUndefined();
    // Back: the owner is still behind, so its shard is paced again.
    log.down = false;
    // What waited is appended first (a heartbeat under way may read the backlog before it does: not asserted).
    for (let attempt = 0; attempt < 100 && cluster.waitingRecords > 0; attempt++) await sleep(10);
    expect(cluster.waitingRecords).toBe(0);
    let paced = cluster.admit([record(slow, 'e')]);
    for (let attempt = 0; attempt < 100 && !paced; attempt++) paced = (await sleep(10), cluster.admit([record(slow, 'e')]));
    expect(paced).toBeInstanceOf(Promise);
    release!();
    await paced;
  });

  it('never paces without a bound', async () => {
    const cluster = await started(undefined);
    for (let upload = 0; upload < 20; upload++) await cluster.handOff([record(slow)]);
    expect(cluster.admit([record(slow)])).toBeUndefined();
  });
});
