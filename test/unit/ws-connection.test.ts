import { describe, expect, it } from 'vitest';
import { Connection, WS_CLOSE, type SocketLike } from '../../gateway/ws/ws-connection.js';

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
const position = (device: string, n: number) => JSON.stringify({ op: 'position', device, n });

describe('WebSocket batched sends', () => {
  it('writes a batch of positions under one cork, in order', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    connection.sendAll([[position('a', 1), 'a'], [position('b', 1), 'b'], [position('a', 2), 'a']]);
    expect(socket.corks).toBe(1);
    expect(socket.sent).toEqual([position('a', 1), position('b', 1), position('a', 2)]);
  });

  it('applies the slow-consumer policy frame by frame inside a batch', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    socket.buffered = 2000;
    connection.sendAll([[position('a', 1), 'a'], [position('a', 2), 'a'], [JSON.stringify({ op: 'alarm' })]]);
    expect(socket.sent).toEqual([JSON.stringify({ op: 'alarm' })]);
    socket.buffered = 0;
    connection.drain();
    expect(socket.sent.at(-1)).toBe(position('a', 2));
    socket.buffered = 6000;
    connection.sendAll([[position('b', 1), 'b']]);
    expect(socket.ended?.code).toBe(WS_CLOSE.slowConsumer);
  });
});

describe('WebSocket slow-consumer policy', () => {
  it('sends everything at once while the subscriber keeps up', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    for (let n = 0; n < 5; n++) connection.send(position('a', n), 'a');
    expect(socket.sent).toHaveLength(5);
  });

  it('coalesces positions per device while behind, latest wins, and drains them when there is room', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    socket.buffered = 2000; // behind: past the coalescing threshold
    for (let n = 0; n < 50; n++) {
      connection.send(position('a', n), 'a');
      connection.send(position('b', n), 'b');
    }
    expect(socket.sent).toEqual([]);
    socket.buffered = 0;
    connection.drain();
    expect(socket.sent).toEqual([position('a', 49), position('b', 49)]);
    // Once drained, positions flow one by one again.
    connection.send(position('a', 50), 'a');
    expect(socket.sent.at(-1)).toBe(position('a', 50));
  });

  it('never coalesces or drops alarms, even behind', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    socket.buffered = 2000;
    for (let n = 0; n < 10; n++) connection.send(JSON.stringify({ op: 'alarm', seq: n }));
    expect(socket.sent).toHaveLength(10);
  });

  it('keeps a position behind pending ones, so a device’s positions never overtake each other', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    socket.buffered = 2000;
    connection.send(position('a', 1), 'a');
    socket.buffered = 0; // room again, but 'a' 1 is still pending
    connection.send(position('a', 2), 'a');
    expect(socket.sent).toEqual([]);
    connection.drain();
    expect(socket.sent).toEqual([position('a', 2)]);
  });

  it('disconnects past the hard limit with a close code that says why', () => {
    const socket = new FakeSocket();
    const connection = new Connection(socket, 'json', limits);
    socket.buffered = 6000;
    connection.send(JSON.stringify({ op: 'alarm', seq: 1 }));
    expect(socket.ended).toEqual({ code: WS_CLOSE.slowConsumer, reason: 'slow consumer: send buffer limit exceeded' });
    expect(socket.sent).toEqual([]);
    connection.send(JSON.stringify({ op: 'alarm', seq: 2 }));
    expect(socket.sent).toEqual([]); // closed connections send nothing more
  });
});
