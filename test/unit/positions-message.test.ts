import { describe, expect, it } from 'vitest';
import { EncodedPayload, decodePayload } from '../../shared/bus/encoded-payload.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { PositionsMessage, positionsFromColumns, positionsToColumns } from '../../shared/positions/positions-message.js';

const indoor: PositionRecord = {
  organizationId: 'org-1',
  deviceId: 'dev-ñ-1',
  userId: 'user-7',
  buildingId: 12,
  floorId: 34,
  indoor: true,
  x: 0.1 + 0.2,
  y: -0,
  lat: 40.41680000000001,
  lng: -3.7038,
  yaw: Math.PI,
  accuracy: 1.5,
  timestamp: 1_795_488_507_636,
  receivedAt: 1_795_488_507_736,
};
const outdoor: PositionRecord = {
  organizationId: 'org-1',
  deviceId: 'dev-2',
  userId: null,
  buildingId: null,
  floorId: null,
  indoor: false,
  x: null,
  y: null,
  lat: -89.99999999,
  lng: 179.5,
  yaw: 0,
  accuracy: null,
  timestamp: 1,
  receivedAt: 2,
};

describe('positions message codec (by columns)', () => {
  it('round-trips every field exactly, nulls included, through the bus codec', () => {
    const message = new PositionsMessage('org-1', [indoor, outdoor, { ...indoor, deviceId: 'dev-3', userId: null, accuracy: null }]);
    const decoded = decodePayload(new EncodedPayload(message).bytes) as PositionsMessage;
    expect(decoded).toBeInstanceOf(PositionsMessage);
    expect(decoded).toEqual(message);
    expect(Object.is(decoded.records[0]!.y, -0)).toBe(true);
    expect(Object.is(decoded.records[1]!.x, null)).toBe(true);
  });

  it('round-trips an empty batch, and a message nested in another payload', () => {
    const empty = new PositionsMessage('org-1', []);
    expect(decodePayload(new EncodedPayload(empty).bytes)).toEqual(empty);
    const nested = { kind: 'replay', batches: [new PositionsMessage('org-1', [outdoor])] };
    expect(decodePayload(new EncodedPayload(nested).bytes)).toEqual(nested);
  });

  it('refuses columns of different lengths (a corrupt message is dropped, not half read)', () => {
    const [organizationId, deviceIds, userIds, flags, numbers] = positionsToColumns(new PositionsMessage('org-1', [indoor, outdoor]));
    expect(() => positionsFromColumns([organizationId, deviceIds, userIds, flags, numbers.subarray(8)])).toThrow(/different lengths/);
    expect(() => positionsFromColumns([organizationId, deviceIds.slice(1), userIds, flags, numbers])).toThrow(/different lengths/);
    expect(() => positionsFromColumns(42 as never)).toThrow(/5-array/);
    expect(() => positionsFromColumns([organizationId, 'd', userIds, flags, numbers] as never)).toThrow(/wrong types/);
  });

  it('reaches the WebSocket codec too (msgpackr extensions are global): a client frame holding one is refused cleanly', async () => {
    const { decode } = await import('../../gateway/ws/ws-codec.js');
    // ext 0x50 around a msgpack 1 (not columns), as a hostile client could send it
    const frame = Buffer.from([0xd4, 0x50, 0x01]);
    expect(() => decode(frame.buffer.slice(frame.byteOffset, frame.byteOffset + frame.length), true)).toThrow();
  });
});
