import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { FUZZ_LOG_LEVEL, FUZZ_ONLY, FUZZ_RUNS, FUZZ_SEED, checkParameters, describeFailure } from './support/fuzz-settings.js';
import { seedWorld, type SeededWorld } from './support/seeded-world.js';
import { FuzzSocket, acceptableClose, encodeFrame, frameProblem, renderCase, socketCase, type SocketCase } from './support/ws-messages.js';

const FILE = 'test/fuzz/websocket.fuzz.test.ts';
/** The default limit: the largest generated frame (100,000-deep nesting, 100,001 emoji) stays under it. */
const WS_MAX_MESSAGE_BYTES = 1024 * 1024;
/** How long one frame may go unanswered on this loaded machine (an upload waits for its commit). */
const ANSWER_MS = 10_000;
const SUBJECT = 'websocket ops';

describe(`fuzz: every WebSocket op (${driverLabel}, seed ${FUZZ_SEED})`, () => {
  let running: RunningGateway;
  let world: SeededWorld;
  let url: string;

  beforeAll(async () => {
    running = await startTestGateway({ WS_MAX_MESSAGE_BYTES: String(WS_MAX_MESSAGE_BYTES), LOG_LEVEL: FUZZ_LOG_LEVEL });
    world = await seedWorld(running.client);
    url = `${running.baseUrl.replace(/^http/, 'ws')}/api/v1/ws`;
  });
  afterAll(async () => {
    await running?.stop();
  });

  /** Plays one case on a fresh socket; throws with what went wrong. */
  async function play(testCase: SocketCase): Promise<void> {
    const headers: Record<string, string> = {};
    if (testCase.auth === 'header') headers.authorization = `Bearer ${world.adminToken}`;
    if (testCase.auth === 'bad-header') headers.authorization = 'Bearer a.b.c';
    const parameter = (name: string, value: SocketCase['positions']) =>
      ({ absent: '', single: `${name}=single`, batched: `${name}=batched`, hostile: `${name}=%00%ED%A0%80` })[value];
    const parameters = [parameter('positions', testCase.positions), parameter('events', testCase.events)].filter((text) => text !== '');
    const query = parameters.length > 0 ? `?${parameters.join('&')}` : '';
    const opened = await FuzzSocket.open(url + query, headers, testCase.protocol === 'none' ? undefined : testCase.protocol);
    if (!(opened instanceof FuzzSocket)) {
      if (opened.problem) throw new Error(opened.problem);
      return;
    }
    const socket = opened;
    try {
      for (const frame of testCase.frames) {
        const encoded = encodeFrame(frame, world);
        if (!encoded || !socket.open) continue;
        const before = socket.frames.length;
        socket.ws.send(encoded.data, { binary: encoded.binary });
        const answered = await socket.until(() => socket.frames.length > before || !socket.open, ANSWER_MS);
        if (!answered) throw new Error(`no answer within ${ANSWER_MS} ms`);
      }
      // Frames already sent may still be answered (an upload waits for its commit): the probe's pong settles it.
      if (socket.open) {
        socket.ws.send(JSON.stringify({ op: 'ping', id: 'probe' }));
        const ponged = await socket.until(
          () => socket.frames.some((frame: any) => frame?.op === 'pong' && frame.id === 'probe') || !socket.open,
          ANSWER_MS,
        );
        if (!ponged) throw new Error(`no pong to the probe within ${ANSWER_MS} ms`);
      }
      const problems = [
        ...socket.problems,
        ...socket.frames.map(frameProblem).filter((problem): problem is string => problem !== undefined),
      ];
      if (socket.closeCode !== undefined && !acceptableClose(socket.closeCode)) {
        problems.push(`the socket closed with ${socket.closeCode}${socket.clientError ? ` (client error: ${socket.clientError})` : ''}`);
      }
      if (problems.length > 0) throw new Error(problems.join('\n'));
    } finally {
      socket.close();
    }
  }

  it('answers malformed and extreme frames of every op with 4xx error frames or a clean close, and keeps answering', {
    timeout: 300_000,
  }, async () => {
    if (FUZZ_ONLY && !SUBJECT.includes(FUZZ_ONLY)) return;
    const details = await fc.check(fc.asyncProperty(socketCase, play), checkParameters(FUZZ_RUNS * 10));
    if (details.failed)
      expect.fail(
        describeFailure(SUBJECT, details, (testCase) => renderCase(testCase as SocketCase, world), `${FILE} -t 'malformed and extreme'`),
      );
  });

  it('closes a socket that sends a message over WS_MAX_MESSAGE_BYTES with 1009 (message too big), not a dropped connection', async () => {
    const socket = await FuzzSocket.open(url, { authorization: `Bearer ${world.adminToken}` });
    if (!(socket instanceof FuzzSocket)) return expect.fail(`upgrade refused: ${socket.refused}`);
    socket.ws.send(JSON.stringify({ op: 'ping', id: 'x'.repeat(WS_MAX_MESSAGE_BYTES + 1) }));
    await socket.until(() => !socket.open, ANSWER_MS);
    expect(socket.closeCode).toBe(1009);
  });

  it('still answers afterwards: /healthz over HTTP and a ping over WebSocket', async () => {
    expect((await running.client.get('/healthz')).status).toBe(200);
    const socket = await FuzzSocket.open(url, {});
    if (!(socket instanceof FuzzSocket)) return expect.fail(`upgrade refused: ${socket.refused}`);
    try {
      socket.ws.send(JSON.stringify({ op: 'ping', id: 'after' }));
      expect(await socket.until(() => socket.frames.some((frame: any) => frame?.op === 'pong' && frame.id === 'after'), ANSWER_MS)).toBe(
        true,
      );
    } finally {
      socket.close();
    }
  });
});
