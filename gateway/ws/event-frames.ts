import type { TriggeredEvent, ZoneEventRecord } from '../detection/detections.js';
import { encode, type WireFormat } from './ws-codec.js';

/**
 * Geofence events and event-area content on their way to subscribers. Each is presented (and, for JSON,
 * written) once, however many subscribers it goes to; the frames of one bus message for one topic are encoded
 * once per format and shape, whatever the number of subscribers.
 *
 * Two shapes, as for positions: one frame per item (`geofence_event`, `event`: the default, which clients
 * written before batching read), or, for a socket opened with `?events=batched`, one frame per bus message and
 * topic holding all of that message's items for the topic, in order (`geofence_events`, `events`, `data: [...]`).
 * At 10,000 fences an upload of 100 positions makes about 640 enter/exit events: a frame each was the largest
 * cost of the gateway.
 */
export class LiveEvent {
  private json?: string;

  constructor(
    readonly data: object,
    /** Whom it is about: a confined (plain) user receives it only when that is them. */
    readonly userId: string | null,
  ) {}

  /** The data as JSON, written once. */
  dataJson(): string {
    return (this.json ??= JSON.stringify(this.data));
  }
}

/** The ops of one kind of item: one frame per item, or one per topic and bus message. */
export interface EventOps {
  single: string;
  batch: string;
}

export const GEOFENCE_EVENT_OPS: EventOps = { single: 'geofence_event', batch: 'geofence_events' };
export const DEVICE_EVENT_OPS: EventOps = { single: 'event', batch: 'events' };

/**
 * A time as ISO 8601, remembering the last one written: a device crossing several fences with one position makes
 * consecutive events of the same time, and `fired_at` is `at` unless debounced (toISOString is most of the cost
 * of presenting an event).
 */
let lastTime = Number.NaN;
let lastIso = '';
const isoOf = (time: number): string => (time === lastTime ? lastIso : ((lastTime = time), (lastIso = new Date(time).toISOString())));

/** An enter or exit as `buildings/{id}/geofence-events` subscribers receive it. */
export function geofenceEvent(event: ZoneEventRecord): LiveEvent {
  const data = {
    type: event.type,
    zone_kind: event.zoneKind,
    geofence_id: event.zoneKind === 'geofence' ? event.zoneId : null,
    zone_id: event.zoneId,
    zone_name: event.zoneName,
    building_id: event.buildingId,
    floor_id: event.floorId,
    device_id: event.deviceId,
    user_id: event.userId,
    at: isoOf(event.at),
    fired_at: isoOf(event.firedAt),
    late: event.late === true,
    ...(event.late ? { delay_ms: Math.round(event.delayMs ?? 0) } : {}),
    ...(event.supersedesAt !== undefined ? { supersedes: { type: event.type, at: new Date(event.supersedesAt).toISOString() } } : {}),
  };
  return new LiveEvent(data, event.userId);
}

/**
 * An event area's content as its device's `devices/{id}` subscribers receive it; `userId`, the user whose
 * position triggered it, confines it (a plain user gets it only while the device is theirs).
 */
export function deviceEvent(event: TriggeredEvent, userId: string | null): LiveEvent {
  return new LiveEvent({ event_id: event.id, building_id: event.buildingId, name: event.name, info: event.info, url: event.url }, userId);
}

/** The items of one bus message for one topic, their frames encoded at most once per format and shape. */
export class TopicEvents {
  private readonly singles: Partial<Record<WireFormat, (string | Buffer)[]>> = {};
  private readonly batches: Partial<Record<WireFormat, string | Buffer>> = {};

  constructor(
    readonly topic: string,
    readonly ops: EventOps,
    readonly events: LiveEvent[] = [],
  ) {}

  single(format: WireFormat, index: number): string | Buffer {
    const frames = (this.singles[format] ??= []);
    const event = this.events[index]!;
    return (frames[index] ??=
      format === 'msgpack'
        ? encode(format, { op: this.ops.single, topic: this.topic, data: event.data })
        : this.json(this.ops.single, event.dataJson()));
  }

  batch(format: WireFormat): string | Buffer {
    if (format === 'msgpack')
      return (this.batches[format] ??= encode(format, {
        op: this.ops.batch,
        topic: this.topic,
        data: this.events.map((event) => event.data),
      }));
    if (this.batches.json === undefined) {
      let data = '';
      for (const event of this.events) data += (data === '' ? '' : ',') + event.dataJson();
      this.batches.json = this.json(this.ops.batch, `[${data}]`);
    }
    return this.batches.json;
  }

  /** Exactly what encode() writes for `{ op, topic, data }`, from the data's JSON written once. */
  private json(op: string, data: string): string {
    return `{"op":${JSON.stringify(op)},"topic":${JSON.stringify(this.topic)},"data":${data}}`;
  }
}
