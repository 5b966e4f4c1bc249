import { describe, expect, it } from 'vitest';
import type { ReplayedDevice } from '../../../gateway/detection/late-detection.js';
import { LateQueue } from '../../../gateway/detection/late-queue.js';
import { StorageUnavailableError } from '../../../shared/errors.js';
import { createLogger } from '../../../shared/logger.js';
import type { PositionRecord } from '../../../shared/positions/position-record.js';
import { positionRecord } from '../../../testkit/positions.js';

const fix = (deviceId: string, timestamp: number) =>
  positionRecord({ organizationId: 'org', deviceId, timestamp, buildingId: 1, x: 1, y: 2, accuracy: null });

/** A late path whose replays wait for `finish()`, recording what each was given; an engine recording queue and release. */
function harness() {
  const runs: string[][] = [];
  /** `replayed`: how far each device was replayed; by default through 100, reading no fix that came meanwhile. */
  const finishes: ((outcome: 'done' | 'outage', replayed?: ReplayedDevice) => void)[] = [];
  const late = {
    run: (records: readonly PositionRecord[]) => {
      runs.push(records.map((record) => `${record.deviceId}@${record.timestamp}`));
      return new Promise<Map<string, ReplayedDevice> | false>((resolve, reject) =>
        finishes.push((outcome, replayed = { from: Infinity, through: 100, readAt: -Infinity }) =>
          outcome === 'outage'
            ? reject(new StorageUnavailableError('down'))
            : resolve(new Map(records.map((record) => [`org|${record.deviceId}`, replayed]))),
        ),
      );
    },
  };
  const queued: string[] = [];
  const released: string[] = [];
  const engine = {
    queue: (keys: Iterable<{ deviceId: string }>) => {
      for (const { deviceId } of keys) queued.push(deviceId);
    },
    release: (_organizationId: string, deviceId: string) => void released.push(deviceId),
  };
  const queue = new LateQueue(late, engine, createLogger('silent'), 1);
  const settle = () => new Promise((resolve) => setTimeout(resolve, 5));
  return { queue, runs, finishes, queued, released, settle };
}

describe('LateQueue: replays beside the on-time series', () => {
  it('takes what came during a replay in one next replay, and answers `replayed` only once the batches before are replayed', async () => {
    const { queue, runs, finishes, queued, released, settle } = harness();
    const held = () => true;
    queue.add('org', [fix('a', 1)], held);
    expect(queued).toEqual(['a']); // its next fixes go to the queue too
    const first = queue.replayed();
    // The on-time series goes on while the replay runs: two more reads leave late fixes meanwhile.
    queue.add('org', [fix('b', 2)], held);
    queue.add('org', [fix('a', 3), fix('b', 4)], held);
    const second = queue.replayed(new Set(['org']));
    let answered = false;
    void first.then(() => (answered = true));
    await settle();
    expect(runs).toEqual([['a@1']]);
    expect(answered).toBe(false);

    finishes[0]!('done');
    expect(await first).toBe(true);
    // 'a' has fixes waiting again: it stays queued until the replay that takes them.
    expect(released).toEqual([]);
    await settle();
    expect(runs).toEqual([['a@1'], ['b@2', 'a@3', 'b@4']]);
    finishes[1]!('done');
    expect(await second).toBe(true);
    expect(released.sort()).toEqual(['a', 'b']);
    expect(await queue.replayed()).toBe(true); // nothing waits
  });

  it('does not replay again what came during a replay that read it already: a device that keeps sending is released', async () => {
    const { queue, runs, finishes, released, settle } = harness();
    const held = () => true;
    queue.add('org', [fix('a', 1)], held);
    await settle();
    // During the replay: a fix of 'a' stored (and so added) before the replay read the device's fixes, then one after.
    queue.add('org', [fix('a', 3)], held);
    await settle();
    const readAt = performance.now();
    await settle();
    queue.add('org', [fix('a', 5)], held);
    finishes[0]!('done', { from: 1, through: 4, readAt });
    await settle();
    // Only the fix it did not read is replayed again; until then 'a' stays queued.
    expect(runs).toEqual([['a@1'], ['a@5']]);
    expect(released).toEqual([]);
    finishes[1]!('done', { from: 5, through: 5, readAt: performance.now() });
    expect(await queue.replayed()).toBe(true);
    expect(released).toEqual(['a']);

    // All that came meanwhile read by the replay: released, and every batch answered, with no other replay.
    queue.add('org', [fix('b', 10)], held);
    await settle();
    queue.add('org', [fix('b', 12)], held);
    const both = queue.replayed();
    await settle();
    finishes[2]!('done', { from: 10, through: 12, readAt: performance.now() });
    expect(await both).toBe(true);
    await settle();
    expect(runs).toEqual([['a@1'], ['a@5'], ['b@10']]);
    expect(released).toEqual(['a', 'b']);
  });

  it('answers false at an outage and replays the same fixes again, with what came since', async () => {
    const { queue, runs, finishes, settle } = harness();
    queue.add('org', [fix('a', 1)], () => true);
    const before = queue.replayed();
    await settle();
    finishes[0]!('outage');
    expect(await before).toBe(false);
    queue.add('org', [fix('b', 2)], () => true);
    const after = queue.replayed();
    await settle();
    expect(runs).toEqual([['a@1'], ['a@1', 'b@2']]);
    finishes[1]!('done');
    expect(await after).toBe(true);
  });

  it('leaves the fixes of a shard given up to its next owner: they are not replayed here', async () => {
    const { queue, runs, finishes, settle } = harness();
    let holds = true;
    queue.add('org', [fix('a', 1)], () => true);
    queue.add('org', [fix('b', 2)], () => holds);
    holds = false;
    await settle();
    expect(runs).toEqual([['a@1']]);
    finishes[0]!('done');
    expect(await queue.replayed()).toBe(true);
  });
});

describe('LateQueue: pacing the replays (embedded storage)', () => {
  it('rests after each replay by the pacing rule, and keeps half the thread once the oldest fix of its round has waited 5 s', async () => {
    let now = 0;
    const rests: { took: number; minShare: number | undefined }[] = [];
    const late = {
      run: async (records: readonly PositionRecord[], _holds: () => boolean, rest?: (took: number) => Promise<void>) => {
        // Each device's replay takes 7 ms (device 'slow': 5 s), then rests as the queue says.
        for (const record of records) {
          const took = record.deviceId === 'slow' ? 5000 : 7;
          now += took;
          await rest?.(took);
        }
        return new Map(records.map((record) => [`org|${record.deviceId}`, { from: Infinity, through: 100, readAt: -Infinity }]));
      },
    };
    const engine = { queue: () => {}, release: () => {} };
    const queue = new LateQueue(
      late,
      engine,
      createLogger('silent'),
      1,
      async (took, minShare) => void rests.push({ took, minShare }),
      () => now,
    );
    queue.add('org', [fix('a', 1), fix('b', 2)], () => true);
    expect(await queue.replayed()).toBe(true);
    // Waited no time: the rule's own minimum share (a twentieth), after each of the two replays.
    expect(rests).toEqual([
      { took: 7, minShare: undefined },
      { took: 7, minShare: undefined },
    ]);
    rests.length = 0;
    // A round whose fixes have waited 5 s by the end of its first replay: the next replays catch up.
    queue.add('org', [fix('slow', 3), fix('c', 4)], () => true);
    expect(await queue.replayed()).toBe(true);
    expect(rests).toEqual([
      { took: 5000, minShare: 0.5 },
      { took: 7, minShare: 0.5 },
    ]);
  });

  it('without a pace (a server) passes no rest to the replays', async () => {
    const given: unknown[] = [];
    const late = {
      run: async (records: readonly PositionRecord[], _holds: () => boolean, rest?: (took: number) => Promise<void>) => {
        given.push(rest);
        return new Map(records.map((record) => [`org|${record.deviceId}`, { from: Infinity, through: 100, readAt: -Infinity }]));
      },
    };
    const queue = new LateQueue(late, { queue: () => {}, release: () => {} }, createLogger('silent'));
    queue.add('org', [fix('a', 1)], () => true);
    expect(await queue.replayed()).toBe(true);
    expect(given).toEqual([undefined]);
  });
});
