import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { DEVICE_EVENT_OPS, GEOFENCE_EVENT_OPS, TopicEvents, deviceEvent, geofenceEvent } from '../../gateway/ws/event-frames.js';
import { Connection, WS_CLOSE, type SocketLike } from '../../gateway/ws/ws-connection.js';
import type { ZoneEventRecord } from '../../shared/detection/zone-event.js';

class FakeSocket implements SocketLike {
  buffered = 0;
  sent: (string | Buffer)[] = [];
  corks = 0;
  ended?: { code?: number; reason?: string };
  getBufferedAmount() {
    return this.buffered;
  }
  send(message: string | Buffer) {
    this.sent.push(message);
    this.buffered += message.length;
    return 1;
  }
  cork(callback: () => void) {
    this.corks++;
    callback();
  }
  end(code?: number, reason?: string) {
    this.ended = { code, reason };
  }
}

const TOPIC = 'buildings/1/geofence-events';
const record = (device: string, type: 'enter' | 'exit', n: number): ZoneEventRecord => ({
  organizationId: 'org',
  buildingId: 1,
  floorId: 2,
  zoneKind: 'geofence',
  zoneId: `fence-${n}`,
  zoneName: `Fence "${n}"`,
  deviceId: device,
  userId: n % 2 ? 'u1' : null,
  type,
  at: Date.UTC(2026, 10, 22) + n,
  firedAt: Date.UTC(2026, 10, 22) + n + 5,
});
const group = () =>
  new TopicEvents(TOPIC, GEOFENCE_EVENT_OPS, [geofenceEvent(record('a', 'enter', 1)), geofenceEvent(record('b', 'exit', 2))]);
const plain = new Packr({ useRecords: false, mapsAsObjects: true });

describe('event frames', () => {
  it('writes exactly what JSON.stringify and msgpack write for the single and the batched shape', () => {
    const events = group();
    const data = events.events.map((event) => event.data);
    expect(events.batch('json')).toBe(JSON.stringify({ op: 'geofence_events', topic: TOPIC, data }));
    expect(events.single('json', 1)).toBe(JSON.stringify({ op: 'geofence_event', topic: TOPIC, data: data[1] }));
    expect(plain.unpack(events.batch('msgpack') as Buffer)).toEqual({ op: 'geofence_events', topic: TOPIC, data });
    expect(plain.unpack(events.single('msgpack', 0) as Buffer)).toEqual({ op: 'geofence_event', topic: TOPIC, data: data[0] });
    expect(data[0]).toEqual({
      type: 'enter',
      zone_kind: 'geofence',
      geofence_id: 'fence-1',
      zone_id: 'fence-1',
      zone_name: 'Fence "1"',
      building_id: 1,
      floor_id: 2,
      device_id: 'a',
      user_id: 'u1',
      at: '2026-11-22T00:00:00.001Z',
      fired_at: '2026-11-22T00:00:00.006Z',
      late: false,
    });
    const content = new TopicEvents('devices/a', DEVICE_EVENT_OPS, [
      deviceEvent({ id: 7, buildingId: 1, name: 'Sale', info: 'now', url: null }, null),
    ]);
    expect(JSON.parse(content.batch('json') as string)).toEqual({
      op: 'events',
      topic: 'devices/a',
      data: [{ event_id: 7, building_id: 1, name: 'Sale', info: 'now', url: null }],
    });
  });

  it('says of an event found late its delay, and of a correction which earlier event it replaces', () => {
    const late = {
      ...record('a', 'exit', 1),
      late: true,
      delayMs: 600_000.4,
      supersedes: '42',
      supersedesAt: Date.UTC(2026, 10, 22, 0, 5),
    };
    const data = JSON.parse(new TopicEvents(TOPIC, GEOFENCE_EVENT_OPS, [geofenceEvent(late)]).single('json', 0) as string).data;
    expect(data).toMatchObject({
      type: 'exit',
      late: true,
      delay_ms: 600_000,
      supersedes: { type: 'exit', at: '2026-11-22T00:05:00.000Z' },
    });
  });

  it('encodes each frame once, however many subscribers take it', () => {
    const events = group();
    expect(events.batch('json')).toBe(events.batch('json'));
    expect(events.single('msgpack', 0)).toBe(events.single('msgpack', 0));
  });

  it('goes out as one frame per topic on a batched socket and a frame per event otherwise, each socket in one cork', () => {
    const batched = new FakeSocket();
    const single = new FakeSocket();
    const limits = { coalesceBytes: 1000, maxBufferBytes: 1_000_000 };
    const other = new TopicEvents('buildings/2/geofence-events', GEOFENCE_EVENT_OPS, [
      geofenceEvent({ ...record('c', 'enter', 3), buildingId: 2 }),
    ]);
    new Connection(batched, 'json', limits, false, true).sendEvents([group(), other]);
    new Connection(single, 'json', limits).sendEvents([group(), other]);
    expect(batched.corks).toBe(1);
    expect(batched.sent.map((frame) => JSON.parse(frame as string)).map((frame) => [frame.op, frame.topic, frame.data.length])).toEqual([
      ['geofence_events', TOPIC, 2],
      ['geofence_events', 'buildings/2/geofence-events', 1],
    ]);
    expect(single.corks).toBe(1);
    expect(single.sent.map((frame) => JSON.parse(frame as string)).map((frame) => [frame.op, frame.data.device_id])).toEqual([
      ['geofence_event', 'a'],
      ['geofence_event', 'b'],
      ['geofence_event', 'c'],
    ]);
  });

  it('is never coalesced, but past the hard limit the subscriber is disconnected as a slow consumer', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', { coalesceBytes: 10, maxBufferBytes: 300 });
    socket.buffered = 200; // past the coalescing threshold: events still go
    connection.sendEvents([group()]);
    expect(socket.sent).toHaveLength(1);
    expect(socket.ended?.code).toBe(WS_CLOSE.slowConsumer);
    connection.sendEvents([group()]);
    expect(socket.sent).toHaveLength(1);
  });
});
