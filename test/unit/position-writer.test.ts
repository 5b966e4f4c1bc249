import { describe, expect, it } from 'vitest';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { PositionStore } from '../../shared/positions/position-store.js';
import { PositionWriter } from '../../shared/positions/position-writer.js';
import type { ZoneEventRecord } from '../../shared/detection/zone-event.js';

const record = (deviceId: string): PositionRecord => ({
  organizationId: 'org',
  deviceId,
  userId: null,
  buildingId: null,
  floorId: null,
  indoor: false,
  x: null,
  y: null,
  lat: 1,
  lng: 1,
  yaw: 0,
  accuracy: null,
  timestamp: 0,
  receivedAt: 0,
});

/** Records each insert; `gate` holds an insert open until the test releases it. */
class FakeStore {
  inserts: string[][] = [];
  zoneEvents: string[][] = [];
  failNext = false;
  gate?: Promise<void>;
  async insert(records: readonly PositionRecord[], zoneEvents: readonly ZoneEventRecord[] = []) {
    this.inserts.push(records.map((r) => r.deviceId));
    this.zoneEvents.push(zoneEvents.map((e) => `${e.deviceId}:${e.type}`));
    if (this.gate) await this.gate;
    if (this.failNext) {
      this.failNext = false;
      throw new Error('database down');
    }
  }
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

  it('rejects every write of a failed insert, and only those', async () => {
    const store = new FakeStore();
    store.failNext = true;
    const writer = new PositionWriter(store as unknown as PositionStore);
    const results = await Promise.allSettled([writer.write([record('a')]), writer.write([record('b')])]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    await expect(writer.write([record('c')])).resolves.toBeUndefined();
  });

  it('splits a backlog over several inserts without splitting any one write', async () => {
    const store = new FakeStore();
    const writer = new PositionWriter(store as unknown as PositionStore, 3);
    await Promise.all([writer.write([record('a1'), record('a2')]), writer.write([record('b1'), record('b2')]), writer.write([record('c1')])]);
    expect(store.inserts).toEqual([['a1', 'a2'], ['b1', 'b2', 'c1']]);
  });

  it('flush waits for everything written so far', async () => {
    const store = new FakeStore();
    const writer = new PositionWriter(store as unknown as PositionStore);
    void writer.write([record('a')]);
    await writer.flush();
    expect(store.inserts).toEqual([['a']]);
  });

  it('commits each write\'s zone events in the same insert as the positions, zone events alone too', async () => {
    const store = new FakeStore();
    const writer = new PositionWriter(store as unknown as PositionStore);
    const event = (deviceId: string, type: 'enter' | 'exit') => ({ deviceId, type }) as ZoneEventRecord;
    await Promise.all([writer.write([record('a')], [event('a', 'enter')]), writer.write([record('b')]), writer.write([], [event('c', 'exit')])]);
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
