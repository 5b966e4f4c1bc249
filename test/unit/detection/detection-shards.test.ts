import { describe, expect, it } from 'vitest';
import { DetectionShards } from '../../../gateway/detection/detection-shards.js';
import type { OwnerDetection } from '../../../gateway/detection/owner-detection.js';
import { LiveState } from '../../../gateway/realtime/live-state.js';
import { createLogger } from '../../../shared/logger.js';
import type { PositionRecord } from '../../../shared/positions/position-record.js';
import type { Storage } from '../../../shared/storage/index.js';
import { positionRecord } from '../../../testkit/positions.js';

const record = (deviceId: string, timestamp: number) =>
  positionRecord({ deviceId, buildingId: 7, x: 1.5, y: 2, lat: 40.1, lng: -3.2, accuracy: null, timestamp, receivedAt: timestamp + 5 });

describe('DetectionShards', () => {
  it('detects on the live state’s object of a position it holds, and on the stream’s copy otherwise, in order', async () => {
    const consumed: PositionRecord[][] = [];
    const detection = { detect: async (records: PositionRecord[]) => (consumed.push(records), true) } as unknown as OwnerDetection;
    const live = new LiveState();
    const held = record('a', 1000);
    live.apply(held);
    live.apply(record('b', 2000)); // newer than the stream's position of b
    const shards = new DetectionShards({
      detection,
      loader: { rebuildBuildings: async () => 0 },
      engine: { forgetBuilding: () => undefined },
      live,
      storage: {} as Storage,
      shards: 4,
      logger: createLogger('silent'),
    });
    // Copies, as decoded from the stream.
    const entries = [
      { id: '1', records: [{ ...held }, record('b', 1500)] },
      { id: '2', records: [record('c', 1600)] },
    ];
    expect(await shards.process(0, entries, () => true)).toBe(true);
    const [records] = consumed;
    expect(records!.map((item) => item.deviceId)).toEqual(['a', 'b', 'c']);
    expect(records![0]).toBe(held);
    expect(records![1]).toBe(entries[0]!.records[1]);
    expect(records![2]).toBe(entries[1]!.records[0]);
  });
});
