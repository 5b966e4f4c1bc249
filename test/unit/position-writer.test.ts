import { describe, expect, it } from 'vitest';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { PositionStore } from '../../shared/positions/position-store.js';
import { PositionWriter } from '../../shared/positions/position-writer.js';
import type { ZoneEventRecord } from '../../shared/detection/zone-event.js';
import { outdoorRecord } from '../../testkit/positions.js';

const record = (deviceId: string) => outdoorRecord({ deviceId, timestamp: 0 });

/** Records each insert; `gate` holds an insert open until the test releases it. */
class FakeStore {
  inserts: string[][] = [];
  zoneEvents: string[][] = [];
  /** Inserts that succeeded, as the statement is atomic: all of its rows or none. */
  committed: string[][] = [];
  failNext = false;
  failure = () => new Error('database down');
  /** Any insert holding a device whose id starts with this fails, as a bad row fails its whole statement. */
  poison?: string;
  gate?: Promise<void>;
  /** Devices whose partition is still to be created: their ensurePartitions waits for `partitionGate`. */
  newDays = new Set<string>();
  partitionGate?: Promise<void>;
  ensured: string[] = [];
  ensurePartitions(records: readonly PositionRecord[]): Promise<void> | undefined {
    const fresh = records.filter((r) => this.newDays.has(r.deviceId));
    if (fresh.length === 0) return undefined;
    return (this.partitionGate ?? Promise.resolve()).then(() => {
      this.ensured.push(...fresh.map((r) => r.deviceId));
      if (fresh.some((r) => r.deviceId.startsWith('no-partition'))) throw new Error('permission denied to create a partition');
    });
  }
  async insert(records: readonly PositionRecord[], zoneEvents: readonly ZoneEventRecord[] = []) {
    this.inserts.push(records.map((r) => r.deviceId));
    this.zoneEvents.push(zoneEvents.map((e) => `${e.deviceId}:${e.type}`));
    if (this.gate) await this.gate;
    if (this.failNext) {
      this.failNext = false;
      throw this.failure();
    }
    if (this.poison && records.some((r) => r.deviceId.startsWith(this.poison!))) {
      throw Object.assign(new Error('value out of range for type double precision'), { code: '22003' });
    }
    this.committed.push(records.map((r) => r.deviceId));
  }
}

/**
 * A writer with a 5 ms commit budget over a fake store whose inserts cost 0.1 ms a row on the writer's clock (5 ms
 * fit 50 rows); `insert` is the store's own, free of cost.
 */
function budgetedWriter() {
  const store = new FakeStore();
  const clock = { now: 0 };
  const insert = store.insert.bind(store);
  store.insert = async (records, zoneEvents = []) => {
    clock.now += (records.length + zoneEvents.length) * 0.1;
    return insert(records, zoneEvents);
  };
  const writer = new PositionWriter(store as unknown as PositionStore, 10_000, 1, { commitBudgetMs: 5, clock: () => clock.now });
  return { store, writer, clock, insert };
}

describe('group commit', () => {
  it('shares one insert between writes made together, and resolves each only after it', async () => {
    const store = new FakeStore();
    const writer = new PositionWriter(store as unknown as PositionStore);
    const settled: string[] = [];
    await Promise.all(['a', 'b', 'c'].map((id) => writer.write([record(id)]).then(() => settled.push(id))));
    expect(store.inserts).toEqual([['a', 'b', 'c']]);
    expect(settled.sort()).toEqual(['a', 'b', 'c']);
  });

  it('gathers writes that arrive during an insert into the next one', async () => {
    const store = new FakeStore();
    let release!: () => void;
    store.gate = new Promise((resolve) => (release = resolve));
    const writer = new PositionWriter(store as unknown as PositionStore);
    const first = writer.write([record('a')]);
    await new Promise((resolve) => setImmediate(resolve)); // the first insert is now running
    const later = [writer.write([record('b')]), writer.write([record('c')])];
    expect(writer.backlog).toBe(2);
    store.gate = undefined;
    release();
    await Promise.all([first, ...later]);
    expect(store.inserts).toEqual([['a'], ['b', 'c']]);
  });

  it('rejects every write of an insert that failed for a connection outage, without retrying them apart', async () => {
    const store = new FakeStore();
    store.failNext = true;
    store.failure = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const writer = new PositionWriter(store as unknown as PositionStore);
    const results = await Promise.allSettled([writer.write([record('a')]), writer.write([record('b')])]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(store.inserts).toEqual([['a', 'b']]);
    await expect(writer.write([record('c')])).resolves.toBeUndefined();
  });

  it('when a shared insert fails on one batch, retries the batches apart: only that batch is rejected', async () => {
    const store = new FakeStore();
    store.poison = 'bad';
    const writer = new PositionWriter(store as unknown as PositionStore);
    const ids = ['a', 'b', 'bad', 'c', 'd'];
    const results = await Promise.allSettled(ids.map((id) => writer.write([record(id), record(`${id}-2`)])));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((results[2] as PromiseRejectedResult).reason.message).toMatch(/value out of range/);
    // Every good batch committed exactly once, the bad one never.
    const committed = store.committed.flat();
    expect(committed.sort()).toEqual(['a', 'a-2', 'b', 'b-2', 'c', 'c-2', 'd', 'd-2']);
  });

  it('stops retrying apart when the database goes down half-way, and rejects the rest untried', async () => {
    const store = new FakeStore();
    store.poison = 'bad';
    const writer = new PositionWriter(store as unknown as PositionStore);
    const insert = store.insert.bind(store);
    store.insert = async (records, zoneEvents) => {
      if (store.inserts.length >= 1) {
        store.inserts.push(records.map((r) => r.deviceId));
        throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
      }
      return insert(records, zoneEvents);
    };
    const results = await Promise.allSettled(['a', 'bad', 'c', 'd'].map((id) => writer.write([record(id)])));
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected']);
    expect(store.inserts).toEqual([
      ['a', 'bad', 'c', 'd'],
      ['a', 'bad'],
    ]);
  });

  it('isolates two failing batches among many, and commits each good one once', async () => {
    const store = new FakeStore();
    store.poison = 'bad';
    const writer = new PositionWriter(store as unknown as PositionStore);
    const ids = Array.from({ length: 9 }, (_, i) => (i === 1 || i === 7 ? `bad${i}` : `ok${i}`));
    const results = await Promise.allSettled(ids.map((id) => writer.write([record(id)])));
    expect(results.map((r) => r.status === 'fulfilled')).toEqual(ids.map((id) => id.startsWith('ok')));
    expect(store.committed.flat().sort()).toEqual(ids.filter((id) => id.startsWith('ok')).sort());
  });

  it("creates a write's missing partitions before it joins a commit, so other writes never wait for that DDL", async () => {
    const store = new FakeStore();
    store.newDays.add('back-dated');
    let release!: () => void;
    store.partitionGate = new Promise((resolve) => (release = resolve));
    const writer = new PositionWriter(store as unknown as PositionStore);
    const old = writer.write([record('back-dated')]);
    await writer.write([record('today')]); // commits while the other write's partition is still being created
    expect(store.inserts).toEqual([['today']]);
    expect(store.ensured).toEqual([]);
    release();
    await old;
    expect(store.ensured).toEqual(['back-dated']);
    expect(store.inserts).toEqual([['today'], ['back-dated']]);
  });

  it('flush waits for a write still creating its partition, and is not left waiting when that fails', async () => {
    const store = new FakeStore();
    store.newDays.add('back-dated');
    store.newDays.add('no-partition');
    let release!: () => void;
    store.partitionGate = new Promise((resolve) => (release = resolve));
    const writer = new PositionWriter(store as unknown as PositionStore);
    const results = Promise.allSettled([writer.write([record('back-dated')]), writer.write([record('no-partition')])]);
    let flushed = false;
    const flushing = writer.flush().then(() => (flushed = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(flushed).toBe(false);
    release();
    await flushing;
    expect(store.committed).toEqual([['back-dated']]);
    expect((await results).map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
  });

  it('fails only the write whose partition could not be created', async () => {
    const store = new FakeStore();
    store.newDays.add('no-partition');
    const writer = new PositionWriter(store as unknown as PositionStore);
    const results = await Promise.allSettled([
      writer.write([record('a')]),
      writer.write([record('no-partition')]),
      writer.write([record('b')]),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(store.committed.flat().sort()).toEqual(['a', 'b']);
  });

  it('splits a backlog over several inserts without splitting any one write', async () => {
    const store = new FakeStore();
    const writer = new PositionWriter(store as unknown as PositionStore, 3);
    await Promise.all([
      writer.write([record('a1'), record('a2')]),
      writer.write([record('b1'), record('b2')]),
      writer.write([record('c1')]),
    ]);
    expect(store.inserts).toEqual([
      ['a1', 'a2'],
      ['b1', 'b2', 'c1'],
    ]);
  });

  it('flush waits for everything written so far', async () => {
    const store = new FakeStore();
    const writer = new PositionWriter(store as unknown as PositionStore);
    void writer.write([record('a')]);
    await writer.flush();
    expect(store.inserts).toEqual([['a']]);
  });

  it("commits each write's zone events in the same insert as the positions, zone events alone too", async () => {
    const store = new FakeStore();
    const writer = new PositionWriter(store as unknown as PositionStore);
    const event = (deviceId: string, type: 'enter' | 'exit') => ({ deviceId, type }) as ZoneEventRecord;
    await Promise.all([
      writer.write([record('a')], [event('a', 'enter')]),
      writer.write([record('b')]),
      writer.write([], [event('c', 'exit')]),
    ]);
    expect(store.inserts).toEqual([['a', 'b']]);
    expect(store.zoneEvents).toEqual([['a:enter', 'c:exit']]);
    await writer.write([], []);
    expect(store.inserts).toHaveLength(1);
  });

  it('with room for two commits, starts a second while the first is held, and flush waits for both', async () => {
    const store = new FakeStore();
    let release!: () => void;
    store.gate = new Promise((resolve) => (release = resolve));
    const writer = new PositionWriter(store as unknown as PositionStore, 10_000, 2);
    const first = writer.write([record('a')]);
    await new Promise((resolve) => setImmediate(resolve));
    const second = writer.write([record('b')]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(store.inserts).toEqual([['a'], ['b']]); // both running
    const third = writer.write([record('c')]); // no room: waits for one of them
    await new Promise((resolve) => setImmediate(resolve));
    expect(store.inserts).toHaveLength(2);
    let flushed = false;
    const flushing = writer.flush().then(() => (flushed = true));
    store.gate = undefined;
    release();
    await Promise.all([first, second, third, flushing]);
    expect(store.inserts).toEqual([['a'], ['b'], ['c']]);
    expect(flushed).toBe(true);
  });
});

describe('which commit failures fail every batch', () => {
  it('takes connection and operator errors for outages, row errors for a batch of its own', async () => {
    const { failsEveryBatch } = await import('../../shared/positions/commit-failure.js');
    expect(failsEveryBatch(Object.assign(new Error('x'), { code: 'ECONNRESET' }))).toBe(true);
    expect(failsEveryBatch(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }))).toBe(true);
    expect(failsEveryBatch(Object.assign(new Error('wrapped'), { cause: Object.assign(new Error('x'), { code: '08006' }) }))).toBe(true);
    expect(failsEveryBatch(Object.assign(new Error('Timeout acquiring a connection'), { name: 'KnexTimeoutError' }))).toBe(true);
    expect(failsEveryBatch(Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), { code: '22021' }))).toBe(false);
    expect(failsEveryBatch(Object.assign(new Error('no partition of relation "positions" found for row'), { code: '23514' }))).toBe(false);
    expect(failsEveryBatch(new Error('something else'))).toBe(false);
  });
});

describe('fairness between organizations (issue 28 item 6)', () => {
  const of = (organizationId: string, ...devices: string[]) =>
    devices.map((deviceId) => outdoorRecord({ organizationId, deviceId, timestamp: 0 }));
  const tick = () => new Promise((resolve) => setImmediate(resolve));

  it("puts a write arriving during one organization's commit before that organization's next writes", async () => {
    const store = new FakeStore();
    let release!: () => void;
    store.gate = new Promise((resolve) => (release = resolve));
    // Room for one write of two rows a commit, as a time budget gives a flooding tenant.
    const writer = new PositionWriter(store as unknown as PositionStore, 2);
    const a1 = writer.write(of('org-a', 'a1', 'a1'));
    await tick(); // A's first commit holds the database
    const later = [writer.write(of('org-a', 'a2', 'a2')), writer.write(of('org-a', 'a3', 'a3')), writer.write(of('org-b', 'b1'))];
    store.gate = undefined;
    release();
    await Promise.all([a1, ...later]);
    // Oldest first would have been a1, a2, a3, then b1 (B waiting for all of A's backlog); in turn, B goes next.
    expect(store.inserts).toEqual([['a1', 'a1'], ['b1'], ['a2', 'a2'], ['a3', 'a3']]);
  });

  it('takes the organizations in turn within one commit, each in its own order', async () => {
    const store = new FakeStore();
    const writer = new PositionWriter(store as unknown as PositionStore);
    await Promise.all([
      writer.write(of('org-a', 'a1')),
      writer.write(of('org-a', 'a2')),
      writer.write(of('org-a', 'a3')),
      writer.write(of('org-b', 'b1')),
      writer.write(of('org-b', 'b2')),
      writer.write(of('org-c', 'c1')),
    ]);
    expect(store.inserts).toEqual([['a1', 'b1', 'c1', 'a2', 'b2', 'a3']]);
  });

  it('with a time budget, sizes commits from the last ones, never splitting a write', async () => {
    const { store, writer, insert } = budgetedWriter();
    expect(writer.commitRowCap).toBe(10_000);
    // 400 rows written together: one commit (nothing known yet), 40 ms on this clock.
    await Promise.all(Array.from({ length: 400 }, (_, i) => writer.write(of('org-a', `x${i}`))));
    expect(store.inserts.map((rows) => rows.length)).toEqual([400]);
    expect(writer.commitRowCap).toBe(50);
    // Alone, org-a's writes were not held to it; once another organization writes, they are.
    await writer.write(of('org-b', 'b0'));
    // Now 200 rows together go in commits of 50, and a write larger than the cap still goes whole.
    await Promise.all([
      ...Array.from({ length: 200 }, (_, i) => writer.write(of('org-a', `y${i}`))),
      writer.write(of('org-a', ...Array.from({ length: 80 }, (_, i) => `big${i}`))),
    ]);
    expect(store.inserts.slice(2).map((rows) => rows.length)).toEqual([50, 50, 50, 50, 80]);
    // A commit that takes less than the budget lets the cap grow again, at most doubling.
    store.insert = insert;
    await Promise.all(Array.from({ length: 200 }, (_, i) => writer.write(of('org-a', `z${i}`))));
    expect(writer.commitRowCap).toBeGreaterThan(50);
    expect(writer.commitRowCap).toBeLessThanOrEqual(10_000);
  });

  it('holds an organization alone to no budget: its commits grow to the row cap, as they would without one', async () => {
    const { store, writer, clock } = budgetedWriter();
    await writer.write(of('org-b', 'b0'));
    await Promise.all(Array.from({ length: 400 }, (_, i) => writer.write(of('org-a', `x${i}`))));
    expect(writer.commitRowCap).toBe(50); // what a commit may take while another organization writes
    // B's last write is over 2 s old: A's writes go together, whatever the budget.
    clock.now += 2500;
    await Promise.all(Array.from({ length: 300 }, (_, i) => writer.write(of('org-a', `y${i}`))));
    expect(store.inserts.slice(2).map((rows) => rows.length)).toEqual([300]);
    // B writes again: A's commits are held to the budget again.
    await writer.write(of('org-b', 'b1'));
    await Promise.all(Array.from({ length: 120 }, (_, i) => writer.write(of('org-a', `z${i}`))));
    expect(store.inserts.slice(4).map((rows) => rows.length)).toEqual([50, 50, 20]);
  });
});
