import { describe, expect, it } from 'vitest';
import { ClusterNode } from '../../../gateway/cluster/cluster-node.js';
import { LocalCoordination } from '../../../gateway/cluster/coordination.js';
import { LocalShardLog } from '../../../gateway/cluster/local-shard-log.js';
import type { ShardHandler } from '../../../gateway/cluster/shard-handler.js';
import type { ShardEntry } from '../../../gateway/cluster/shard-log.js';
import type { DetectionEngine } from '../../../gateway/detection/detection-engine.js';
import type { DetectionOutbox } from '../../../gateway/detection/detection-outbox.js';
import type { Detections } from '../../../gateway/detection/detections.js';
import { OwnerDetection } from '../../../gateway/detection/owner-detection.js';
import type { BuildingRegistry, BuildingRuntime } from '../../../gateway/realtime/building-registry.js';
import { EncodedPayload } from '../../../shared/bus/encoded-payload.js';
import { createLogger } from '../../../shared/logger.js';
import type { PositionRecord } from '../../../shared/positions/position-record.js';
import { PositionsMessage } from '../../../shared/positions/positions-message.js';
import { positionRecord } from '../../../testkit/positions.js';

const record = (organizationId: string, deviceId: string, timestamp: number, buildingId = 1) =>
  positionRecord({ organizationId, deviceId, timestamp, buildingId, x: 1, y: 2, accuracy: null });

/**
 * An owner whose detectors only log what they see, on a clock that each of tenant A's positions moves on by 5 ms
 * (a building of heavy fences), tenant B's by nothing: no real time is measured, the slices are decided by it.
 */
function owner() {
  let now = 0;
  const observed: string[] = [];
  const emitted: string[][] = [];
  const engine = {
    observe: (position: PositionRecord, _runtime: unknown, found: Detections) => {
      if (position.organizationId === 'A') now += 5;
      observed.push(`${position.organizationId}:${position.deviceId}:${position.timestamp}`);
      found.triggered.push({ organizationId: position.organizationId, deviceId: position.deviceId, event: {} as never });
    },
  } as unknown as DetectionEngine;
  const runtime = {} as BuildingRuntime;
  const registry = { peek: () => runtime, get: async () => runtime } as unknown as BuildingRegistry;
  const outbox = {
    add: (found: Detections) => emitted.push(found.triggered.map((item) => `${item.organizationId}:${item.deviceId}`)),
  } as unknown as DetectionOutbox;
  return { detection: new OwnerDetection(engine, registry, outbox, undefined, () => now), observed, emitted };
}

describe('fair detection between organizations (issue 28 item 6)', () => {
  it("runs tenant B's positions of a read after one slice of tenant A's costly ones, not after all of them, each device in order", async () => {
    const { detection, observed, emitted } = owner();
    const heavy = Array.from({ length: 40 }, (_, index) => record('A', `a${index % 4}`, 1000 + index));
    const light = [record('B', 'b1', 1000), record('B', 'b2', 1001), record('B', 'b1', 1002)];
    // One read holding both tenants' positions, A's first (as appended).
    expect(await detection.detect([...heavy, ...light], () => true)).toBe(true);

    const firstOfB = observed.findIndex((entry) => entry.startsWith('B:'));
    // A's first slice ends after its first costly position: B's three come next, before A's second.
    expect(firstOfB).toBe(1);
    expect(observed.slice(1, 4)).toEqual(['B:b1:1000', 'B:b2:1001', 'B:b1:1002']);
    // Everything observed once, and each device's positions in their order.
    expect(observed).toHaveLength(43);
    for (const device of ['A:a0', 'A:a1', 'A:a2', 'A:a3', 'B:b1', 'B:b2']) {
      const times = observed.filter((entry) => entry.startsWith(`${device}:`)).map((entry) => Number(entry.split(':')[2]));
      expect(times).toEqual([...times].sort((x, y) => x - y));
    }
    // A's costly positions go to the outbox a slice (one position) at a time; B's in one.
    expect(emitted.filter((slice) => slice.some((item) => item.startsWith('B:')))).toEqual([['B:b1', 'B:b2', 'B:b1']]);
    expect(emitted.filter((slice) => slice.some((item) => item.startsWith('A:'))).every((slice) => slice.length === 1)).toBe(true);
  });

  it("emits nothing more of either tenant's read once ownership is lost between slices", async () => {
    const { detection, emitted, observed } = owner();
    let held = true;
    const heavy = Array.from({ length: 10 }, (_, index) => record('A', 'a', 1000 + index));
    const detecting = detection.detect([...heavy, record('B', 'b', 1000)], () => held);
    // Run under the lease so far: A's first slice, and B's whole (light) series.
    expect(emitted).toEqual([['A:a'], ['B:b']]);
    held = false;
    expect(await detecting).toBe(false);
    expect(emitted).toEqual([['A:a'], ['B:b']]);
    expect(observed.length).toBeLessThan(11);
  });

  it("processes the shards of one read at once: tenant B's shard is done before tenant A's costly shard", async () => {
    const log = new LocalShardLog();
    const events: string[] = [];
    const handler: ShardHandler = {
      gain: async () => undefined,
      lose: () => undefined,
      buildingsIn: () => 0,
      stored: async () => true,
      // Each position is a slice that yields the event loop, as the owner's detection does.
      async process(shard: number, entries: readonly ShardEntry[]) {
        events.push(`start ${shard}`);
        for (const entry of entries) for (const _ of entry.records) await new Promise((resolve) => setImmediate(resolve));
        events.push(`done ${shard}`);
        return true;
      },
    };
    const node = new ClusterNode(
      new LocalCoordination('member'),
      log,
      handler,
      { shards: 2, heartbeatMs: 50, ttlMs: 60_000 },
      createLogger('silent'),
    );
    // Before the first read: shard 0 holds tenant A's long backlog, shard 1 one upload of tenant B's.
    for (let upload = 0; upload < 10; upload++) {
      const records = Array.from({ length: 100 }, (_, index) => record('A', `a${index}`, 1000 + upload));
      await log.append(0, new EncodedPayload(new PositionsMessage('A', records)));
    }
    await log.append(1, new EncodedPayload(new PositionsMessage('B', [record('B', 'b', 1000)])));
    await node.start();
    try {
      await expect.poll(() => events.includes('done 0'), { timeout: 10_000 }).toBe(true);
      // Read together (shard 0 first): B's was processed beside A's, and finished long before it.
      expect(events).toEqual(['start 0', 'start 1', 'done 1', 'done 0']);
    } finally {
      await node.stop();
    }
  });
});
