import fc from 'fast-check';
import { Packr } from 'msgpackr';
import WebSocket from 'ws';
import { clip, isKnownDefect } from './fuzz-settings.js';
import { deepJson, hostileValue } from './hostile-values.js';
import { mutate, serialize, type BodyMutation } from './http-operations.js';
import { RawJson } from './schema-arbitrary.js';
import type { SeededWorld } from './seeded-world.js';

const packr = new Packr({ useRecords: false });

/** Placeholders filled in when a frame is sent: the admin's token and the seeded building. */
const TOKEN = '{{token}}';
const BUILDING = '{{building}}';

/** Frames and how they travel: JSON text, msgpack, or bytes that are neither. */
export type Frame =
  | { kind: 'json'; value: unknown; mutation: BodyMutation }
  | { kind: 'msgpack'; value: unknown; mutation: BodyMutation; extra?: { key: string; value: MsgpackOnly } }
  | { kind: 'text'; text: string }
  | { kind: 'bytes'; bytes: Uint8Array };

/**
 * The bus's positions extension (msgpack ext type 0x50, registered process-wide, so the WebSocket codec decodes it
 * too) around arbitrary bytes, and around a msgpack value of the columns' shape with arbitrary parts.
 */
const positionsExtension = fc
  .oneof(
    fc.uint8Array({ maxLength: 64 }),
    fc
      .tuple(
        fc.string(),
        fc.array(fc.oneof(fc.string(), fc.integer())),
        fc.array(fc.constantFrom(null, 'u')),
        fc.uint8Array({ maxLength: 8 }),
        fc.uint8Array({ maxLength: 96 }),
      )
      .map((columns) => new Packr().pack(columns)),
  )
  .filter((payload) => payload.length <= 255)
  .map((payload) => Uint8Array.from([0xc7, payload.length, 0x50, ...payload]));

/** Values msgpack carries that JSON cannot: what a binary client may send however the socket was negotiated. */
export type MsgpackOnly = 'NaN' | 'Infinity' | 'bigint' | 'date' | 'invalid-date' | 'buffer' | 'undefined' | 'map';
const msgpackOnly = (kind: MsgpackOnly): unknown =>
  ({
    NaN: NaN,
    Infinity: -Infinity,
    bigint: 2n ** 64n - 1n,
    date: new Date(0),
    'invalid-date': new Date(NaN),
    buffer: Buffer.from([0, 255]),
    undefined: undefined,
    map: new Map<unknown, unknown>([
      [{ a: 1 }, 1],
      [2, 'two'],
    ]),
  })[kind];

export interface SocketCase {
  auth: 'header' | 'none' | 'bad-header';
  protocol: 'json' | 'msgpack' | 'none';
  /** The `positions` query of the upgrade: valid values and a hostile one. */
  positions: 'single' | 'batched' | 'absent' | 'hostile';
  /** The `events` query of the upgrade, likewise. */
  events: 'single' | 'batched' | 'absent' | 'hostile';
  frames: Frame[];
}

const id = fc.oneof(
  { weight: 6, arbitrary: fc.oneof(fc.string({ maxLength: 12 }), fc.integer()) },
  { weight: 3, arbitrary: hostileValue },
  // The defect this entry names takes the process down: generated again as soon as the entry is gone.
  { weight: isKnownDefect('ws-deep-id') ? 0 : 2, arbitrary: fc.constantFrom(10_000, 100_000).map((depth) => deepJson(depth)) },
  { weight: 1, arbitrary: fc.constant(undefined) },
);

const topic = fc.oneof(
  fc.constantFrom(
    `buildings/${BUILDING}/positions`,
    `buildings/${BUILDING}/alarms`,
    `buildings/${BUILDING}/geofence-events`,
    'organization/alarms',
    'devices/fuzz-device-1',
  ),
  fc.constantFrom(
    'buildings/999999/positions',
    'buildings//positions',
    'buildings/1e308/alarms',
    'devices/',
    ...(isKnownDefect('nul-to-postgres') ? [] : ['devices/\u0000']),
    '../alarms',
    'x'.repeat(5000),
    '',
  ),
  fc.string({ maxLength: 30 }),
);

const pose = fc.record(
  {
    device_id: fc.oneof(fc.constant('fuzz-device-1'), fc.string({ minLength: 1, maxLength: 12 })),
    timestamp: fc.constant(1_700_000_000_000),
    building_id: fc.constant(BUILDING),
    floor_id: fc.integer({ min: 1, max: 3 }),
    x: fc.double({ min: 0, max: 100, noNaN: true }),
    y: fc.double({ min: 0, max: 100, noNaN: true }),
  },
  { requiredKeys: ['device_id', 'timestamp'] },
);

/** The ops the gateway knows, well-formed (with a token, the seeded building, ids of every kind), and some it does not. */
const operation: fc.Arbitrary<Record<string, unknown>> = fc.oneof(
  fc.record(
    {
      op: fc.constant('auth'),
      token: fc.oneof(fc.constant(TOKEN), fc.constantFrom('fc_garbage', 'a.b.c', '', 'Bearer x', 'x'.repeat(10_000))),
      id,
    },
    { requiredKeys: ['op', 'token'] },
  ),
  fc.record(
    {
      op: fc.constant('subscribe'),
      topics: fc.array(topic, { minLength: 1, maxLength: 3 }),
      since_seq: fc.oneof(fc.nat(), fc.constantFrom(-1, 1e308, 2 ** 53 + 2, 0.5)),
      id,
    },
    { requiredKeys: ['op', 'topics'] },
  ),
  fc.record(
    { op: fc.constant('unsubscribe'), topics: fc.array(topic, { minLength: 1, maxLength: 3 }), id },
    { requiredKeys: ['op', 'topics'] },
  ),
  fc.record({ op: fc.constant('upload'), poses: fc.array(pose, { minLength: 1, maxLength: 3 }), id }, { requiredKeys: ['op', 'poses'] }),
  fc.record({ op: fc.constant('ping'), id }, { requiredKeys: ['op'] }),
  fc.record(
    { op: fc.constantFrom('PING', 'pong', 'ack', 'error', 'authenticated', '', 'constructor', '__proto__', 'toString'), id },
    { requiredKeys: ['op'] },
  ),
);

const mutation: fc.Arbitrary<BodyMutation> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<BodyMutation>({ kind: 'none' }) },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), value: hostileValue }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('add' as const),
      at: fc.nat(),
      key: fc.constantFrom('__proto__', 'constructor', 'extra', ''),
      value: hostileValue,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('whole' as const), value: hostileValue }) },
);

const frame: fc.Arbitrary<Frame> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('json' as const), value: operation, mutation }) },
  {
    weight: 3,
    arbitrary: fc.record(
      {
        kind: fc.constant('msgpack' as const),
        value: operation,
        mutation,
        extra: fc.record({
          key: fc.constantFrom('id', 'id', 'id', 'op', 'since_seq', 'poses', 'token', 'topics'),
          value: fc.constantFrom<MsgpackOnly>('NaN', 'Infinity', 'bigint', 'date', 'invalid-date', 'buffer', 'undefined', 'map'),
        }),
      },
      { requiredKeys: ['kind', 'value', 'mutation'] },
    ),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('text' as const),
      text: fc.constantFrom(
        '',
        '{',
        '{"op":',
        'null',
        '[]',
        '"ping"',
        '{"op":"ping"}{"op":"ping"}',
        '\u0000',
        '\ud800',
        '{"op":"ping","id":1e400}',
      ),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('bytes' as const),
      bytes: fc.oneof(
        fc.uint8Array({ minLength: 1, maxLength: 64 }),
        positionsExtension,
        fc.constantFrom(
          Uint8Array.of(0xc1),
          Uint8Array.of(0xdd, 0xff, 0xff, 0xff, 0xff),
          Uint8Array.of(0xd4, 0xff, 0x00),
          Uint8Array.of(0xc7, 0x10, 0x72),
        ),
      ),
    }),
  },
);

export const socketCase: fc.Arbitrary<SocketCase> = fc.record({
  auth: fc.oneof(
    { weight: 5, arbitrary: fc.constant('header' as const) },
    { weight: 3, arbitrary: fc.constant('none' as const) },
    { weight: 1, arbitrary: fc.constant('bad-header' as const) },
  ),
  protocol: fc.constantFrom('json' as const, 'msgpack' as const, 'none' as const),
  positions: fc.oneof(
    { weight: 6, arbitrary: fc.constant('absent' as const) },
    { weight: 1, arbitrary: fc.constantFrom('single' as const, 'batched' as const, 'hostile' as const) },
  ),
  events: fc.oneof(
    { weight: 6, arbitrary: fc.constant('absent' as const) },
    { weight: 1, arbitrary: fc.constantFrom('single' as const, 'batched' as const, 'hostile' as const) },
  ),
  frames: fc.array(frame, { minLength: 1, maxLength: 3 }),
});

/** Whether a value (after mutation) carries the deeply nested `id` of a listed crash. */
function deepIdExcluded(value: unknown): boolean {
  if (!isKnownDefect('ws-deep-id') || value === null || typeof value !== 'object') return false;
  const echoed = (value as { id?: unknown }).id;
  return echoed instanceof RawJson && /nested (\d{4,})/.test(echoed.label);
}

/** The bytes of a frame, with the placeholders filled in, or undefined when a known defect excludes it. */
export function encodeFrame(frame: Frame, world: SeededWorld): { data: string | Buffer; binary: boolean } | undefined {
  const fill = (text: string) => text.replaceAll(TOKEN, world.adminToken).replaceAll(BUILDING, world.ids.building);
  if (frame.kind === 'text') return { data: frame.text, binary: false };
  if (frame.kind === 'bytes') return { data: Buffer.from(frame.bytes), binary: true };
  const mutated = mutate(frame.value, frame.mutation);
  if (deepIdExcluded(mutated)) return undefined;
  const text = fill(serialize(mutated, world));
  if (frame.kind === 'json') return { data: text, binary: false };
  const value = JSON.parse(text);
  if (frame.extra && value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const excluded = frame.extra.key === 'id' && frame.extra.value === 'bigint' && isKnownDefect('ws-bigint-id');
    if (!excluded) value[frame.extra.key] = msgpackOnly(frame.extra.value);
  }
  try {
    return { data: packr.pack(value), binary: true };
  } catch {
    return { data: text, binary: false }; // too deep for the encoder of the test itself
  }
}

export function renderCase(testCase: SocketCase, world: SeededWorld): string {
  const frames = testCase.frames.map((frame) => {
    const encoded = encodeFrame(frame, world);
    if (!encoded) return '(excluded: known defect)';
    if (!encoded.binary) return `text ${clip(String(encoded.data), 400)}`;
    const bytes = encoded.data as Buffer;
    let decoded = '';
    try {
      decoded = ` = ${clip(String(JSON.stringify(packr.unpack(bytes), (_, v) => (typeof v === 'bigint' ? `${v}n` : v))), 300)}`;
    } catch {
      decoded = ' (not msgpack)';
    }
    return `binary <${bytes.length} bytes> ${clip(bytes.toString('hex'), 120)}${decoded}`;
  });
  return `socket auth=${testCase.auth} protocol=${testCase.protocol} positions=${testCase.positions} events=${testCase.events}\n${frames.map((text) => `  → ${text}`).join('\n')}`;
}

/** A socket that records frames (decoded by kind), errors and its close code. */
export class FuzzSocket {
  readonly frames: unknown[] = [];
  readonly problems: string[] = [];
  closeCode?: number;
  /** What the client library reported before a close without a close frame (a reset, a frame it refused), if anything. */
  clientError?: string;
  private listeners: (() => void)[] = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      try {
        this.frames.push(isBinary ? packr.unpack(data) : JSON.parse(data.toString('utf8')));
      } catch {
        this.problems.push(`a ${isBinary ? 'binary' : 'text'} frame that does not decode: ${clip(data.toString('hex'), 80)}`);
      }
      this.notify();
    });
    ws.on('close', (code) => {
      this.closeCode = code;
      this.notify();
    });
    // The close code says what happened; the error says why when there was no close frame (1006).
    ws.on('error', (error: Error) => (this.clientError ??= error.message));
  }

  private notify(): void {
    for (const listener of this.listeners.splice(0)) listener();
  }

  /** Opens a socket; an upgrade refused must be a 4xx with the JSON error body, and is returned as a problem or undefined. */
  static open(
    url: string,
    headers: Record<string, string>,
    protocol?: string,
  ): Promise<FuzzSocket | { refused: number; problem?: string }> {
    const ws = new WebSocket(url, protocol ? [protocol] : [], { headers });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new FuzzSocket(ws)));
      ws.once('unexpected-response', (_request, response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => {
          const status = response.statusCode ?? 0;
          let problem: string | undefined;
          try {
            const body = JSON.parse(text);
            if (status >= 500 || body.status !== status || typeof body.code !== 'string' || typeof body.message !== 'string')
              problem = `upgrade refused with ${status}: ${clip(text, 200)}`;
          } catch {
            problem = `upgrade refused with ${status} and a body that is not JSON: ${clip(text, 200)}`;
          }
          resolve({ refused: status, problem });
        });
      });
      ws.once('error', reject);
    });
  }

  /** Resolves once a frame past `count` arrives or the socket closes; false after `timeoutMs`. */
  async until(predicate: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.listeners.push(() => (clearTimeout(timer), resolve()));
      });
    }
    return true;
  }

  get open(): boolean {
    return this.closeCode === undefined && this.ws.readyState === WebSocket.OPEN;
  }

  close(): void {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.terminate();
  }
}

/** Close codes a gateway may end a fuzzed socket with: normal, going away, policy, too big, and 4000 + a 4xx status. */
export const acceptableClose = (code: number): boolean =>
  code === 1000 || code === 1001 || code === 1008 || code === 1009 || (code >= 4400 && code < 4500) || code === 4008;

/** What every frame the gateway sends back owes the client: an error frame is `{op: 'error', status: 4xx, code, message}`. */
export function frameProblem(frame: unknown): string | undefined {
  if (frame === null || typeof frame !== 'object') return `a frame that is not an object: ${clip(String(JSON.stringify(frame)), 120)}`;
  const { op, status, code, message } = frame as Record<string, unknown>;
  if (typeof op !== 'string') return `a frame without op: ${clip(JSON.stringify(frame), 200)}`;
  if (op !== 'error') return undefined;
  if (typeof status !== 'number' || status < 400 || status >= 500 || typeof code !== 'string' || typeof message !== 'string') {
    return `an error frame that is not {status: 4xx, code, message}: ${clip(JSON.stringify(frame), 300)}`;
  }
  return undefined;
}
