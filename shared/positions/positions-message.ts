import type { EncodedPayload } from '../bus/encoded-payload.js';
import type { PositionRecord } from './position-record.js';

/**
 * What travels on the bus for one accepted batch: the change records (all of the organization), built once. A
 * class so that the bus codec packs it by columns (`positionsToColumns`), on the bus and in the shard streams alike.
 */
export class PositionsMessage {
  constructor(
    readonly organizationId: string,
    readonly records: PositionRecord[],
  ) {}
}

/**
 * The positions of one accepted batch in one shard, packed at most once: its bytes go on the shard's bus channel
 * and into the shard's stream too (gateway/cluster/shard-log.ts).
 */
export type EncodedPositions = EncodedPayload<PositionsMessage>;

/** The msgpack extension type of a PositionsMessage (msgpackr itself uses 0, 0x42, 0x52, 0x62, 0x65, 0x69, 0x70, 0x73, 0x74, 0x78, 0xff). */
export const POSITIONS_EXTENSION_TYPE = 0x50;

/** Float64 columns per position, in this order; null (a number field that may be absent) is NaN. */
const NUMBERS = 10;

/**
 * A batch by columns, as the msgpack extension of PositionsMessage writes it: the organization once, device and
 * user ids as string arrays, `indoor` as one byte each, every number as a little-endian float64 (exact, as msgpack's
 * own would be). About four times faster to pack and to unpack than the records one by one (msgpackr records).
 */
type Columns = [organizationId: string, deviceIds: string[], userIds: (string | null)[], indoor: Buffer, numbers: Buffer];

export function positionsToColumns(message: PositionsMessage): Columns {
  const { records } = message;
  const count = records.length;
  const deviceIds = new Array<string>(count);
  const userIds = new Array<string | null>(count);
  const indoor = Buffer.allocUnsafe(count);
  const numbers = Buffer.allocUnsafe(count * NUMBERS * 8);
  const view = new DataView(numbers.buffer, numbers.byteOffset, numbers.byteLength);
  for (let index = 0; index < count; index++) {
    const record = records[index]!;
    deviceIds[index] = record.deviceId;
    userIds[index] = record.userId;
    indoor[index] = record.indoor ? 1 : 0;
    const at = index * NUMBERS * 8;
    view.setFloat64(at, record.buildingId ?? NaN, true);
    view.setFloat64(at + 8, record.floorId ?? NaN, true);
    view.setFloat64(at + 16, record.x ?? NaN, true);
    view.setFloat64(at + 24, record.y ?? NaN, true);
    view.setFloat64(at + 32, record.lat, true);
    view.setFloat64(at + 40, record.lng, true);
    view.setFloat64(at + 48, record.yaw, true);
    view.setFloat64(at + 56, record.accuracy ?? NaN, true);
    view.setFloat64(at + 64, record.timestamp, true);
    view.setFloat64(at + 72, record.receivedAt, true);
  }
  return [message.organizationId, deviceIds, userIds, indoor, numbers];
}

const orNull = (value: number): number | null => (Number.isNaN(value) ? null : value);

/**
 * msgpackr's extensions are registered for the whole process, so anything but well-formed columns is refused
 * rather than trusted. (The WebSocket codec's plain Packr refuses a client's frame of this type before reaching
 * here; the WebSocket fuzz sends such frames.)
 */
export function positionsFromColumns(columns: Columns): PositionsMessage {
  if (!Array.isArray(columns) || columns.length !== 5) throw new Error('positions columns are not a 5-array');
  const [organizationId, deviceIds, userIds, indoor, bytes] = columns;
  if (
    typeof organizationId !== 'string' ||
    !Array.isArray(deviceIds) ||
    !Array.isArray(userIds) ||
    !(indoor instanceof Uint8Array) ||
    !(bytes instanceof Uint8Array)
  ) {
    throw new Error('positions columns of the wrong types');
  }
  const count = deviceIds.length;
  if (userIds.length !== count || indoor.length !== count || bytes.length !== count * NUMBERS * 8)
    throw new Error('positions columns of different lengths');
  // The bytes are a view into the message, at any offset: read through a DataView, not a Float64Array.
  const numbers = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const records = new Array<PositionRecord>(count);
  for (let index = 0; index < count; index++) {
    const at = index * NUMBERS * 8;
    records[index] = {
      organizationId,
      deviceId: deviceIds[index]!,
      userId: userIds[index] ?? null,
      buildingId: orNull(numbers.getFloat64(at, true)),
      floorId: orNull(numbers.getFloat64(at + 8, true)),
      indoor: indoor[index] === 1,
      x: orNull(numbers.getFloat64(at + 16, true)),
      y: orNull(numbers.getFloat64(at + 24, true)),
      lat: numbers.getFloat64(at + 32, true),
      lng: numbers.getFloat64(at + 40, true),
      yaw: numbers.getFloat64(at + 48, true),
      accuracy: orNull(numbers.getFloat64(at + 56, true)),
      timestamp: numbers.getFloat64(at + 64, true),
      receivedAt: numbers.getFloat64(at + 72, true),
    };
  }
  return new PositionsMessage(organizationId, records);
}
