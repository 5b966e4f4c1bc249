import { describe, expect, it } from 'vitest';
import { BacklogCeiling } from '../../gateway/ws/backlog-ceiling.js';
import { DEVICE_EVENT_OPS, TopicEvents, deviceEvent } from '../../gateway/ws/event-frames.js';
import { LivePosition, TopicPositions, positionFrame, positionsFrame } from '../../gateway/ws/position-frames.js';
import { Connection, WS_CLOSE, type SocketLike } from '../../gateway/ws/ws-connection.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';

/** A socket whose send buffer the test fills and drains by hand, the way a slow subscriber's would. */
class FakeSocket implements SocketLike {
  buffered = 0;
  sent: string[] = [];
  ended?: { code?: number; reason?: string };
  getBufferedAmount() {
    return this.buffered;
  }
  send(message: string | Buffer) {
    this.sent.push(message.toString());
    return 1;
  }
  corks = 0;
  cork(callback: () => void) {
    this.corks++;
    callback();
  }
  end(code?: number, reason?: string) {
    this.ended = { code, reason };
  }
}

const limits = { coalesceBytes: 1000, maxBufferBytes: 5000 };
const TOPIC = 'buildings/1/positions';
const record = (device: string, n: number): PositionRecord => ({
  organizationId: 'org',
  deviceId: device,
  userId: null,
  buildingId: 1,
  floorId: 2,
  indoor: true,
  x: n,
  y: 0,
  lat: 40,
  lng: -3,
  yaw: 0,
  accuracy: null,
  timestamp: Date.UTC(2026, 10, 22) + n * 1000,
  receivedAt: Date.UTC(2026, 10, 22) + n * 1000,
});
const live = (device: string, n: number) => new LivePosition(record(device, n), null);
/** One batch's positions for the building topic. */
const batch = (...positions: [string, number][]) =>
  new TopicPositions(
    TOPIC,
    positions.map(([device, n]) => live(device, n)),
  );
/** The single-position frame a subscriber receives (as JSON text). */
const position = (device: string, n: number) => positionFrame('json', TOPIC, live(device, n)) as string;
const alarm = (seq?: number) => JSON.stringify({ op: 'alarm', seq });

describe('WebSocket batched sends', () => {
  it('writes a batch of positions under one cork, in order', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    connection.sendPositions([batch(['a', 1], ['b', 1], ['a', 2])]);
    expect(socket.corks).toBe(1);
    expect(socket.sent).toEqual([position('a', 1), position('b', 1), position('a', 2)]);
  });

  it('applies the slow-consumer policy frame by frame inside a batch', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    socket.buffered = 2000;
    connection.sendPositions([batch(['a', 1], ['a', 2])]);
    connection.send(alarm());
    expect(socket.sent).toEqual([alarm()]);
    socket.buffered = 0;
    connection.drain();
    expect(socket.sent.at(-1)).toBe(position('a', 2));
    socket.buffered = 6000;
    connection.sendPositions([batch(['b', 1])]);
    expect(socket.ended?.code).toBe(WS_CLOSE.slowConsumer);
  });
});

describe('WebSocket slow-consumer policy', () => {
  it('sends everything at once while the subscriber keeps up', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    for (let n = 0; n < 5; n++) connection.sendPositions([batch(['a', n])]);
    expect(socket.sent).toHaveLength(5);
  });

  it('coalesces positions per device while behind, latest wins, and drains them when there is room', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    socket.buffered = 2000; // behind: past the coalescing threshold
    for (let n = 0; n < 50; n++) connection.sendPositions([batch(['a', n], ['b', n])]);
    expect(socket.sent).toEqual([]);
    socket.buffered = 0;
    connection.drain();
    expect(socket.sent).toEqual([position('a', 49), position('b', 49)]);
    // Once drained, positions flow one by one again.
    connection.sendPositions([batch(['a', 50])]);
    expect(socket.sent.at(-1)).toBe(position('a', 50));
  });

  it('never coalesces or drops alarms, even behind', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    socket.buffered = 2000;
    for (let n = 0; n < 10; n++) connection.send(alarm(n));
    expect(socket.sent).toHaveLength(10);
  });

  it('keeps a position behind pending ones, so a device’s positions never overtake each other', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    socket.buffered = 2000;
    connection.sendPositions([batch(['a', 1])]);
    socket.buffered = 0; // room again, but 'a' 1 is still pending
    connection.sendPositions([batch(['a', 2])]);
    expect(socket.sent).toEqual([]);
    connection.drain();
    expect(socket.sent).toEqual([position('a', 2)]);
  });

  it('disconnects past the hard limit with a close code that says why', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    socket.buffered = 6000;
    connection.send(alarm(1));
    expect(socket.ended).toEqual({ code: WS_CLOSE.slowConsumer, reason: 'slow consumer: send buffer limit exceeded' });
    expect(socket.sent).toEqual([]);
    connection.send(alarm(2));
    expect(socket.sent).toEqual([]); // closed connections send nothing more
  });
});

describe('WebSocket feed and alarm limits (issue 28 item 3)', () => {
  const feedLimits = { coalesceBytes: 1000, maxBufferBytes: 50_000, maxFeedBufferBytes: 5000 };
  const events = () =>
    new TopicEvents('devices/a', DEVICE_EVENT_OPS, [deviceEvent({ id: 7, buildingId: 1, name: 'Sale', info: 'now', url: null }, null)]);

  it('a backlog between the feed limit and the alarm limit still takes alarms, but not events', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', feedLimits);
    socket.buffered = 20_000;
    connection.send(alarm(1));
    expect(socket.sent).toEqual([alarm(1)]);
    expect(connection.closed).toBe(false);
    connection.sendEvents([events()]);
    expect(socket.ended).toEqual({ code: WS_CLOSE.slowConsumer, reason: 'slow consumer: send buffer limit exceeded' });
    expect(socket.sent).toEqual([alarm(1)]);
  });

  it('positions past the feed limit close the socket too (coalescing keeps them under it while the socket reads)', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', feedLimits);
    socket.buffered = 5001;
    connection.sendPositions([batch(['a', 1])]);
    expect(socket.ended?.code).toBe(WS_CLOSE.slowConsumer);
  });

  it('an alarm a socket cannot take closes it (the client resumes with since_seq); it is never dropped silently', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', feedLimits);
    socket.buffered = 50_001;
    connection.send(alarm(1));
    expect(socket.ended?.code).toBe(WS_CLOSE.slowConsumer);
  });
});

describe('BacklogCeiling', () => {
  const open = (buffered: number) => {
    const socket = new FakeSocket();
    socket.buffered = buffered;
    return new Connection(socket, 'json', limits);
  };

  it('closes the largest backlogs first, only until the total is under the ceiling', () => {
    const sockets = [open(100), open(900), open(0), open(400), open(600)];
    const ceiling = new BacklogCeiling(() => sockets, 1000);
    expect(ceiling.enforce()).toBe(2); // 2000 -> 1100 (900 closed) -> 500 (600 closed)
    expect(sockets.map((connection) => connection.closed)).toEqual([false, true, false, false, true]);
    expect((sockets[1]!.ws as FakeSocket).ended?.code).toBe(WS_CLOSE.slowConsumer);
    expect(ceiling.enforce()).toBe(0);
  });

  it('closes nothing while the total is at or under the ceiling', () => {
    const sockets = [open(500), open(500)];
    expect(new BacklogCeiling(() => sockets, 1000).enforce()).toBe(0);
    expect(sockets.some((connection) => connection.closed)).toBe(false);
  });
});

describe('WebSocket batched position frames (?positions=batched)', () => {
  const frame = (...positions: [string, number][]) =>
    positionsFrame(
      'json',
      TOPIC,
      positions.map(([device, n]) => live(device, n)),
    ) as string;

  it('sends a batch for a topic as one frame, in order', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits, true);
    connection.sendPositions([batch(['a', 1], ['b', 1], ['a', 2])]);
    expect(socket.sent).toEqual([frame(['a', 1], ['b', 1], ['a', 2])]);
    expect(JSON.parse(socket.sent[0]!)).toMatchObject({ op: 'positions', topic: TOPIC });
  });

  it('coalesces per device while behind and drains the latest of each as one frame per topic', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits, true);
    socket.buffered = 2000;
    for (let n = 0; n < 20; n++) connection.sendPositions([batch(['a', n], ['b', n])]);
    connection.send(alarm(1));
    expect(socket.sent).toEqual([alarm(1)]);
    socket.buffered = 0;
    connection.drain();
    expect(socket.sent.slice(1)).toEqual([frame(['a', 19], ['b', 19])]);
    expect(connection.pending.size).toBe(0);
    socket.buffered = 6000;
    connection.sendPositions([batch(['a', 20])]);
    expect(socket.ended?.code).toBe(WS_CLOSE.slowConsumer);
  });
});
