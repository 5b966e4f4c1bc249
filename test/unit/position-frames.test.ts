import { Unpackr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { LivePosition, TopicPositions, positionFrame, positionsFrame } from '../../gateway/ws/position-frames.js';
import { toFeature } from '../../gateway/realtime/geojson.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';

const base: PositionRecord = {
  organizationId: 'org',
  deviceId: 'phone-1',
  userId: null,
  buildingId: 7,
  floorId: 12,
  indoor: true,
  x: 3.25,
  y: -1.5,
  lat: 40.4168,
  lng: -3.7038,
  yaw: 1.5707963267948966,
  accuracy: 2.5,
  timestamp: Date.UTC(2026, 10, 22, 9, 30, 15, 123),
  receivedAt: 0,
};
const records: [string, PositionRecord, number | null][] = [
  ['indoor', base, 3.5],
  ['outdoor, no building', { ...base, buildingId: null, floorId: null, indoor: false, x: null, y: null, accuracy: null }, null],
  [
    'quotes, backslashes, control and non-ASCII characters',
    { ...base, deviceId: 'a "b" \\ c\n\u0001 ñ 📍', userId: '0b7f7a4e-9a1f-4c55-9a8e-2f1c7e1b2a33' },
    null,
  ],
  ['extreme numbers', { ...base, x: 1e21, y: 1e-7, lat: -0, lng: 179.99999999999997, yaw: -0.1 }, 0],
];

describe('live position frames', () => {
  it.each(records)('writes the Feature exactly as JSON.stringify does (%s)', (_, record, levelHeight) => {
    const position = new LivePosition(record, levelHeight);
    expect(position.featureJson()).toBe(JSON.stringify(toFeature(record, levelHeight)));
    expect(positionFrame('json', 'devices/x', position)).toBe(
      JSON.stringify({ op: 'position', topic: 'devices/x', data: toFeature(record, levelHeight) }),
    );
  });

  it("batches a topic's positions in one frame, as JSON and as standard msgpack", () => {
    const positions = records.map(([, record, levelHeight]) => new LivePosition(record, levelHeight));
    const expected = {
      op: 'positions',
      topic: 'buildings/7/positions',
      data: records.map(([, record, levelHeight]) => toFeature(record, levelHeight)),
    };
    expect(JSON.parse(positionsFrame('json', 'buildings/7/positions', positions) as string)).toEqual(JSON.parse(JSON.stringify(expected)));
    const unpacked = new Unpackr({ useRecords: false, mapsAsObjects: true }).unpack(
      positionsFrame('msgpack', 'buildings/7/positions', positions) as Buffer,
    );
    expect(unpacked).toEqual(JSON.parse(JSON.stringify(expected))); // msgpack, like JSON, has no -0
  });

  it("encodes a topic's frames once per format and shape", () => {
    const group = new TopicPositions('devices/phone-1', [new LivePosition(base, null)]);
    expect(group.single('json', 0)).toBe(group.single('json', 0));
    expect(group.batch('msgpack')).toBe(group.batch('msgpack'));
    expect(group.single('json', 0)).not.toBe(group.batch('json'));
  });
});
