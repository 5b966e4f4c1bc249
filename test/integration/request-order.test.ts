import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * Sends a request's head and the first bytes of its body; once an answer arrives, sends the rest of the body
 * and then a second request on the same connection. Collects everything until the connection closes.
 */
function rawExchange(
  port: number,
  head: string,
  firstChunk: Buffer,
  rest: Buffer,
  next: string,
): { socket: Socket; answer: Promise<string> } {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  socket.write(head);
  socket.write(firstChunk);
  const chunks: Buffer[] = [];
  let continued = false;
  const answer = new Promise<string>((resolve) => {
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      if (continued || !Buffer.concat(chunks).toString('latin1').includes('}')) return;
      continued = true;
      if (!socket.destroyed && socket.writable) {
        socket.write(rest);
        socket.write(next);
      }
    });
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
  });
  return { socket, answer };
}

/** Issue 28, L8: a caller is known before its body is read. */
describe(`the body of a request is read only once its caller is known (${driverLabel})`, () => {
  let running: RunningGateway;
  beforeAll(async () => {
    running = await startTestGateway();
  });
  afterAll(async () => running?.stop());

  it('answers an unauthenticated upload with 401 and closes, without waiting for (or reading) its 9 MiB body', async () => {
    const declared = 9 * 1024 * 1024;
    const head = `POST /api/v1/images HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: ${declared}\r\n\r\n`;
    const next = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
    const { socket, answer } = rawExchange(running.gateway.port, head, Buffer.alloc(1024, 0x61), Buffer.alloc(declared - 1024, 0x61), next);
    try {
      const text = await answer;
      expect(text).toMatch(/^HTTP\/1\.1 401 /);
      expect(text).toContain('"code":"unauthenticated"');
      // The connection was closed after the 401: the body was never read, so the next request got no answer.
      expect(text.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    } finally {
      socket.destroy();
    }
  });
});

/**
 * A known limitation of the pinned uWebSockets.js build (20.30.0-unofficial.0): its parser takes a header name
 * holding `_` (valid HTTP) as malformed and drops the request without an answer; the connection closes on the
 * idle timeout. Fixed upstream in a later release. docs/access.md ("Header names with `_`") gives the mitigation: a proxy in
 * front that drops such headers (nginx does by default: `underscores_in_headers off`). This test documents the
 * current behaviour; when it starts to fail, the build answers such requests and the limitation can go.
 */
describe(`header names with an underscore (${driverLabel}, known limitation of the pinned build)`, () => {
  let running: RunningGateway;
  beforeAll(async () => {
    running = await startTestGateway();
  });
  afterAll(async () => running?.stop());

  it('KNOWN LIMITATION: a request with a header named X_Custom gets no answer and its connection is closed', async () => {
    const socket = connect(running.gateway.port, '127.0.0.1');
    socket.on('error', () => undefined);
    const received: Buffer[] = [];
    socket.on('data', (chunk) => received.push(chunk));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX_Custom: 1\r\n\r\n');
    await closed;
    expect(Buffer.concat(received).toString('latin1')).toBe('');
    // The same request without the underscore is answered.
    expect((await running.client.get('/healthz')).status).toBe(200);
  }, 60_000);

  it('KNOWN LIMITATION: a request line and headers past 4 KiB get no answer when they arrive in two reads', async () => {
    const head = (queryBytes: number) =>
      `GET /healthz?q=${'x'.repeat(queryBytes)} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`;
    /** The first line of the answer to `request`, sent whole or in two writes 50 ms apart ('' when none came). */
    const answer = (request: string, split: boolean) =>
      new Promise<string>((resolve) => {
        const socket = connect(running.gateway.port, '127.0.0.1');
        socket.setNoDelay(true);
        socket.on('error', () => undefined);
        const received: Buffer[] = [];
        socket.on('data', (chunk) => received.push(chunk));
        socket.on('close', () => resolve(Buffer.concat(received).toString('latin1').split('\r\n')[0]!));
        if (!split) return void socket.write(request);
        socket.write(request.slice(0, -10));
        setTimeout(() => socket.write(request.slice(-10)), 50);
      });
    expect(await answer(head(5_000), true)).toBe('');
    // Whole, the same request is answered, and so is one within 4 KiB in two reads.
    expect(await answer(head(5_000), false)).toBe('HTTP/1.1 200 OK');
    expect(await answer(head(3_500), true)).toBe('HTTP/1.1 200 OK');
    // Past about 128 KiB, not even whole.
    expect(await answer(head(130_000), false)).toBe('');
  }, 60_000);
});
