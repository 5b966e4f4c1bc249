import type { PositionRecord } from '../../shared/positions/position-record.js';
import { toFeature, type PositionFeature } from '../realtime/geojson.js';
import { encode, type WireFormat } from './ws-codec.js';

/**
 * Live positions on their way to subscribers. A position's Feature is built (and, for JSON, written) once,
 * however many topics and subscribers it goes to; the frames of one batch for one topic are encoded once per
 * format and shape, whatever the number of subscribers.
 *
 * Two shapes: one `{"op":"position","topic","data":<Feature>}` frame per position (the default), or, for a
 * socket opened with `?positions=batched`, one `{"op":"positions","topic","data":[<Feature>...]}` frame per
 * accepted batch and topic: a control room following thousands of devices then costs the gateway a frame per
 * upload rather than per position.
 */
export class LivePosition {
  private object?: PositionFeature;
  private json?: string;

  constructor(
    readonly record: PositionRecord,
    readonly levelHeight: number | null,
  ) {}

  get deviceId(): string {
    return this.record.deviceId;
  }

  feature(): PositionFeature {
    return (this.object ??= toFeature(this.record, this.levelHeight));
  }

  /** The Feature as JSON, exactly as JSON.stringify(feature()) writes it, without building the object. */
  featureJson(): string {
    return (this.json ??= featureJson(this.record, this.levelHeight));
  }
}

/** JSON numbers as JSON.stringify writes them (a non-finite number, which validation keeps out, as null). */
const num = (value: number | null): string | number => (value === null || !Number.isFinite(value) ? 'null' : value);
const str = (value: string | null): string => (value === null ? 'null' : JSON.stringify(value));

function featureJson(record: PositionRecord, levelHeight: number | null): string {
  const local = record.x === null || record.y === null ? 'null' : `[${num(record.x)},${num(record.y)}]`;
  const id = str(record.deviceId);
  return (
    `{"type":"Feature","id":${id},"geometry":{"type":"Point","coordinates":[${num(record.lat)},${num(record.lng)}]},` +
    `"properties":{"device_id":${id},"user_id":${str(record.userId)},"building_id":${num(record.buildingId)},"floor_id":${num(record.floorId)},` +
    `"level_height":${num(levelHeight)},"indoor":${record.indoor},"time":"${new Date(record.timestamp).toISOString()}","yaw":${num(record.yaw)},` +
    `"accuracy":${num(record.accuracy)},"local_coordinates":${local}}}`
  );
}

/** A single position's frame. */
export function positionFrame(format: WireFormat, topic: string, position: LivePosition): string | Buffer {
  if (format === 'msgpack') return encode(format, { op: 'position', topic, data: position.feature() });
  return `{"op":"position","topic":${JSON.stringify(topic)},"data":${position.featureJson()}}`;
}

/** Several positions of one topic in one frame, in the order given. */
export function positionsFrame(format: WireFormat, topic: string, positions: readonly LivePosition[]): string | Buffer {
  if (format === 'msgpack') return encode(format, { op: 'positions', topic, data: positions.map((position) => position.feature()) });
  let data = '';
  for (const position of positions) data += (data === '' ? '' : ',') + position.featureJson();
  return `{"op":"positions","topic":${JSON.stringify(topic)},"data":[${data}]}`;
}

/** The positions of one accepted batch for one topic, their frames encoded at most once per format and shape. */
export class TopicPositions {
  private readonly singles: Partial<Record<WireFormat, (string | Buffer)[]>> = {};
  private readonly batches: Partial<Record<WireFormat, string | Buffer>> = {};

  constructor(
    readonly topic: string,
    readonly positions: LivePosition[] = [],
  ) {}

  single(format: WireFormat, index: number): string | Buffer {
    const frames = (this.singles[format] ??= []);
    return (frames[index] ??= positionFrame(format, this.topic, this.positions[index]!));
  }

  batch(format: WireFormat): string | Buffer {
    return (this.batches[format] ??= positionsFrame(format, this.topic, this.positions));
  }
}
