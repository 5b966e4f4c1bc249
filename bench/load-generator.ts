/**
 * Load generator for the ingest and detection benchmarks, run as a child process (`bench/load-client.ts`
 * forks it) so its CPU time is not taken from the gateway's event loop and its memory is not in the
 * gateway's RSS. It only ever talks to 127.0.0.1, and every run is bounded in time (or in poses, for seeding).
 *
 * A run drives upload "lanes": each lane owns a disjoint set of devices and has at most one upload in flight,
 * so every device's timestamps reach the gateway in order (the live state ignores an older fix). A lane is a
 * keep-alive HTTP connection, or one slot of a WebSocket's window of unacknowledged uploads. Each pose is
 * stamped with its send time (`timestamp = Date.now()`), and the precise send time is remembered per
 * (device, timestamp) so a live subscriber can compute upload-to-delivery latency on the same clock.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { summarise } from './harness.js';

export interface VenueSpec {
  buildingId: number;
  floorId: number;
  /** Devices are `${devicePrefix}${index padded to 4}`. */
  devicePrefix: string;
  devices: number;
  /** Floor extent (metres): device walks stay inside it. */
  width: number;
  length: number;
  /**
   * How devices move. `circle` (default): each walks a 3 m circle around its own centre. `random`: each starts
   * at a uniform point of the floor and moves by up to ±`stepM` in x and y per pose, clamped to the floor,
   * from a seeded generator (the geofencing scenario's workload).
   */
  walk?: { kind: 'circle' } | { kind: 'random'; seed: number; stepM: number };
}

export type UploadTarget = { type: 'http'; url: string; token?: string } | { type: 'ws'; url: string; token: string; sockets: number };

export interface LoadCommand {
  target: UploadTarget;
  venue: VenueSpec;
  lanes: number;
  /** Poses per upload. */
  batch: number;
  warmupMs: number;
  durationMs: number;
  /** Offered positions/s (open loop, paced); absent: closed loop, each lane sends again once acknowledged. */
  rate?: number;
  /** Seeding: every device sends exactly this many poses, then the run ends (duration ignored). */
  rounds?: number;
  /** A live subscriber (WebSocket) open for the whole run. */
  /** `batched`: the subscriber opens the socket with `?positions=batched` (one frame per upload and topic). */
  subscribe?: {
    url: string;
    token: string;
    positionsTopic?: string;
    alarmsTopic?: string;
    geofenceEventsTopic?: string;
    measure: boolean;
    batched?: boolean;
  };
  /** Alarm triggers: single-pose uploads with `danger: true`, each from a distinct device, during the window. */
  alarms?: { url: string; token: string; perSecond: number; devicePrefix: string; count: number; buildingId: number; floorId: number };
}

export interface Summary {
  p50: number;
  p95: number;
  p99: number;
  max: number;
  n: number;
}

export interface LoadResult {
  windowMs: number;
  /** Poses acknowledged (204 / ack) within the measured window. */
  ackedPoses: number;
  ackedRequests: number;
  /** Batches a paced run could not send because every lane was busy (offered load not achieved). */
  skippedBatches: number;
  errors: number;
  errorSamples: string[];
  /** Upload round trip (send to 204/ack), for uploads sent within the window. */
  ackMs: Summary;
  /** Positions received by the subscriber within the window (in single or batched frames). */
  deliveredPositions: number;
  /** Upload-to-subscriber latency of poses sent within the window (when measured). */
  deliveryMs: Summary;
  /** Poses sent within the window whose frame never came (coalesced away, or later than the grace period). */
  undelivered: number;
  alarmsSent: number;
  alarmsReceived: number;
  /** Geofence enter/exit events the subscriber received within the window (single or batched frames). */
  geofenceEvents: number;
  alarmMs: Summary;
  /** Generator CPU (user + system) over the window, as a share of one core. */
  generatorCpu: number;
}

const STEPS = 64;
const COS = Array.from({ length: STEPS }, (_, i) => Math.cos((2 * Math.PI * i) / STEPS));
const SIN = Array.from({ length: STEPS }, (_, i) => Math.sin((2 * Math.PI * i) / STEPS));
const WALK_RADIUS_M = 3;

export const deviceName = (prefix: string, index: number) => `${prefix}${String(index).padStart(4, '0')}`;

/** mulberry32: a small seeded generator, so a workload is the same in every run. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Each device walks a 3 m circle around its own centre, about 0.3 m per pose, crossing fence lines now and then. */
class Fleet {
  readonly ids: string[];
  readonly steps: Int32Array;
  private readonly cx: Float64Array;
  private readonly cy: Float64Array;
  private readonly head: string;

  /**
   * Random walk only: the generator moving every device. Fences and starting points repeat exactly; with several
   * lanes the steps are drawn in the order uploads are acknowledged, so walks differ a little between runs.
   */
  private readonly random?: () => number;

  constructor(readonly venue: VenueSpec) {
    const n = venue.devices;
    this.ids = Array.from({ length: n }, (_, d) => deviceName(venue.devicePrefix, d));
    this.steps = new Int32Array(n);
    this.cx = new Float64Array(n);
    this.cy = new Float64Array(n);
    const walk = venue.walk ?? { kind: 'circle' };
    if (walk.kind === 'random') {
      this.random = seededRandom(walk.seed);
      for (let d = 0; d < n; d++) {
        this.cx[d] = this.random() * venue.width;
        this.cy[d] = this.random() * venue.length;
      }
    } else {
      const margin = WALK_RADIUS_M + 1;
      for (let d = 0; d < n; d++) {
        this.cx[d] = margin + ((d * 37.31) % (venue.width - 2 * margin));
        this.cy[d] = margin + ((d * 23.71) % (venue.length - 2 * margin));
        this.steps[d] = d % STEPS;
      }
    }
    this.head = `,"building_id":${venue.buildingId},"floor_id":${venue.floorId},"x":`;
  }

  pose(d: number, timestamp: number): string {
    const step = this.steps[d]++ % STEPS;
    let x: string;
    let y: string;
    const walk = this.venue.walk;
    if (walk?.kind === 'random') {
      const clamp = (value: number, max: number) => Math.min(max, Math.max(0, value));
      // The first pose of a device is its starting point; each later one moves it.
      if (this.steps[d]! > 1) {
        this.cx[d] = clamp(this.cx[d]! + (this.random!() * 2 - 1) * walk.stepM, this.venue.width);
        this.cy[d] = clamp(this.cy[d]! + (this.random!() * 2 - 1) * walk.stepM, this.venue.length);
      }
      x = this.cx[d]!.toFixed(2);
      y = this.cy[d]!.toFixed(2);
    } else {
      x = (this.cx[d]! + WALK_RADIUS_M * COS[step]!).toFixed(2);
      y = (this.cy[d]! + WALK_RADIUS_M * SIN[step]!).toFixed(2);
    }
    return `{"device_id":"${this.ids[d]}","timestamp":${timestamp}${this.head}${x},"y":${y},"yaw":${(step / 10).toFixed(1)},"accuracy":2}`;
  }
}

interface Lane {
  devices: number[];
  cursor: number;
  busy: boolean;
  socket?: WsUploader;
}

function httpPost(agent: http.Agent, url: URL, headers: Record<string, string>, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          if (text.length < 400) text += chunk;
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

/** One authenticated WebSocket; uploads resolve when their ack (or error) with the same id comes back. */
class WsUploader {
  private readonly waiting = new Map<number, (reply: { ok: boolean; op: string; text: string }) => void>();
  private nextId = 1;

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data: Buffer) => {
      const frame = JSON.parse(data.toString()) as { op: string; id?: number };
      if (typeof frame.id !== 'number') return;
      const resolve = this.waiting.get(frame.id);
      if (!resolve) return;
      this.waiting.delete(frame.id);
      resolve({ ok: frame.op === 'ack', op: frame.op, text: frame.op === 'ack' ? '' : data.toString().slice(0, 400) });
    });
    ws.on('close', () => {
      for (const resolve of this.waiting.values()) resolve({ ok: false, op: 'closed', text: 'socket closed' });
      this.waiting.clear();
    });
  }

  static async open(url: string, token: string): Promise<WsUploader> {
    const ws = await openSocket(url);
    const uploader = new WsUploader(ws);
    const reply = await uploader.request(`{"op":"auth","token":${JSON.stringify(token)},"id":0}`, 0);
    if (reply.op !== 'authenticated') throw new Error(`ws auth failed: ${reply.text}`);
    return uploader;
  }

  private request(payload: string, id: number): Promise<{ ok: boolean; op: string; text: string }> {
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.ws.send(payload);
    });
  }

  upload(poses: string): Promise<{ ok: boolean; op: string; text: string }> {
    const id = this.nextId++;
    return this.request(`{"op":"upload","id":${id},"poses":[${poses}]}`, id);
  }

  close(): void {
    this.ws.close();
  }
}

function openSocket(url: string, protocols: string[] = []): Promise<WebSocket> {
  const ws = new WebSocket(url, protocols, { perMessageDeflate: false });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_request, response) => reject(new Error(`upgrade refused: ${response.statusCode}`)));
    ws.once('error', reject);
  });
}

/** Sends one JSON frame and waits for the reply with the same id. */
function ask(ws: WebSocket, message: Record<string, unknown>): Promise<any> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no reply to ${message.op}`)), 10_000);
    const onMessage = (data: Buffer) => {
      const frame = JSON.parse(data.toString());
      if (frame.id !== message.id) return;
      clearTimeout(timer);
      ws.off('message', onMessage);
      if (frame.op === 'error') reject(new Error(`${message.op} refused: ${JSON.stringify(frame)}`));
      else resolve(frame);
    };
    ws.on('message', onMessage);
    ws.send(JSON.stringify(message));
  });
}

async function run(command: LoadCommand): Promise<LoadResult> {
  const fleet = new Fleet(command.venue);
  const { batch } = command;
  const lanes: Lane[] = Array.from({ length: command.lanes }, () => ({ devices: [], cursor: 0, busy: false }));
  for (let d = 0; d < command.venue.devices; d++) lanes[d % lanes.length]!.devices.push(d);

  // Upload transport.
  const agent = new http.Agent({ keepAlive: true, maxSockets: command.lanes });
  const sockets: WsUploader[] = [];
  const target = command.target;
  let send: (lane: Lane, poses: string) => Promise<{ ok: boolean; text: string }>;
  if (target.type === 'http') {
    const url = new URL(target.url);
    const headers: Record<string, string> = target.token ? { authorization: `Bearer ${target.token}` } : {};
    send = async (_lane, poses) => {
      const reply = await httpPost(agent, url, headers, `{"poses":[${poses}]}`);
      return { ok: reply.status === 204, text: reply.status === 204 ? '' : `${reply.status} ${reply.text}` };
    };
  } else {
    for (let i = 0; i < target.sockets; i++) sockets.push(await WsUploader.open(target.url, target.token));
    lanes.forEach((lane, i) => {
      lane.socket = sockets[i % sockets.length];
    });
    send = (lane, poses) => lane.socket!.upload(poses);
  }

  // Timeline.
  const t0 = performance.now();
  const windowStart = t0 + command.warmupMs;
  const windowEnd = windowStart + command.durationMs;
  const inWindow = (t: number) => t >= windowStart && t < windowEnd;

  // Live subscriber.
  const sentAt = new Map<string, number>();
  const alarmSentAt = new Map<string, number>();
  const deliverySamples: number[] = [];
  const alarmSamples: number[] = [];
  let deliveredPositions = 0;
  let alarmsReceived = 0;
  let geofenceEvents = 0;
  let subscriber: WebSocket | undefined;
  const measure = command.subscribe?.measure ?? false;
  if (command.subscribe) {
    const options = command.subscribe;
    subscriber = await openSocket(options.batched ? `${options.url}?positions=batched` : options.url);
    await ask(subscriber, { op: 'auth', token: options.token, id: 'auth' });
    const topics = [options.positionsTopic, options.alarmsTopic, options.geofenceEventsTopic].filter((topic): topic is string => !!topic);
    const delivered = (now: number, feature: { id: string; properties: { time: string } }) => {
      if (inWindow(now)) deliveredPositions++;
      if (!measure) return;
      const key = `${feature.id}|${Date.parse(feature.properties.time)}`;
      const sent = sentAt.get(key);
      if (sent !== undefined) {
        sentAt.delete(key);
        deliverySamples.push(now - sent);
      }
    };
    subscriber.on('message', (data: Buffer) => {
      const now = performance.now();
      const frame = JSON.parse(data.toString());
      if (frame.op === 'position') delivered(now, frame.data);
      else if (frame.op === 'positions') for (const feature of frame.data) delivered(now, feature);
      else if (frame.op === 'geofence_event') {
        if (inWindow(now)) geofenceEvents++;
      } else if (frame.op === 'geofence_events') {
        if (inWindow(now)) geofenceEvents += frame.data.length;
      } else if (frame.op === 'alarm') {
        const sent = alarmSentAt.get(frame.data.device_id);
        if (sent !== undefined) {
          alarmSentAt.delete(frame.data.device_id);
          alarmsReceived++;
          alarmSamples.push(now - sent);
        }
      }
    });
    await ask(subscriber, { op: 'subscribe', topics, id: 'sub' });
  }

  let ackedPoses = 0;
  let ackedRequests = 0;
  let skippedBatches = 0;
  let errors = 0;
  const errorSamples: string[] = [];
  const ackSamples: number[] = [];
  const inFlight = new Set<Promise<void>>();

  const fire = (lane: Lane, devices?: number[]): Promise<void> => {
    lane.busy = true;
    const timestamp = Date.now();
    const started = performance.now();
    const chosen = devices ?? [];
    if (!devices) {
      const count = Math.min(batch, lane.devices.length);
      for (let i = 0; i < count; i++) {
        chosen.push(lane.devices[lane.cursor]!);
        lane.cursor = (lane.cursor + 1) % lane.devices.length;
      }
    }
    let poses = '';
    for (const d of chosen) poses += (poses ? ',' : '') + fleet.pose(d, timestamp);
    const tracked = measure && inWindow(started);
    if (tracked) for (const d of chosen) sentAt.set(`${fleet.ids[d]}|${timestamp}`, started);
    const promise = send(lane, poses).then(
      (reply) => {
        const done = performance.now();
        if (reply.ok) {
          if (command.rounds !== undefined || inWindow(done)) {
            ackedPoses += chosen.length;
            ackedRequests++;
          }
          if (inWindow(started)) ackSamples.push(done - started);
        } else {
          errors++;
          if (errorSamples.length < 5) errorSamples.push(reply.text);
        }
      },
      (error: Error) => {
        errors++;
        if (errorSamples.length < 5) errorSamples.push(String(error.message));
      },
    );
    const settled = promise.finally(() => {
      lane.busy = false;
      inFlight.delete(settled);
    });
    inFlight.add(settled);
    return settled;
  };

  // Alarm triggers, paced, during the window only.
  let alarmsSent = 0;
  let alarmTimer: NodeJS.Timeout | undefined;
  const alarmAgent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  if (command.alarms) {
    const options = command.alarms;
    const url = new URL(options.url);
    const headers = { authorization: `Bearer ${options.token}` };
    alarmTimer = setInterval(() => {
      const now = performance.now();
      if (!inWindow(now) || alarmsSent >= options.count) return;
      const device = deviceName(options.devicePrefix, alarmsSent++);
      alarmSentAt.set(device, now);
      const pose = `{"device_id":"${device}","timestamp":${Date.now()},"building_id":${options.buildingId},"floor_id":${options.floorId},"x":1.5,"y":1.5,"danger":true}`;
      const request = httpPost(alarmAgent, url, headers, `{"poses":[${pose}]}`).then(
        (reply) => {
          if (reply.status !== 204) {
            errors++;
            if (errorSamples.length < 5) errorSamples.push(`alarm upload: ${reply.status} ${reply.text}`);
          }
        },
        () => void errors++,
      );
      const settled = request.finally(() => inFlight.delete(settled));
      inFlight.add(settled);
    }, 1000 / options.perSecond);
  }

  let cpuAtStart: NodeJS.CpuUsage | undefined;
  let cpuAtEnd: NodeJS.CpuUsage | undefined;
  const cpuMark = setInterval(() => {
    const now = performance.now();
    if (!cpuAtStart && now >= windowStart) cpuAtStart = process.cpuUsage();
    if (!cpuAtEnd && now >= windowEnd) cpuAtEnd = process.cpuUsage(cpuAtStart);
  }, 5);

  if (command.rounds !== undefined) {
    // Seeding: every device, `rounds` times, each lane sequentially.
    await Promise.all(
      lanes.map(async (lane) => {
        for (let round = 0; round < command.rounds!; round++) {
          for (let start = 0; start < lane.devices.length; start += batch) await fire(lane, lane.devices.slice(start, start + batch));
        }
      }),
    );
  } else if (command.rate === undefined) {
    // Closed loop: every lane keeps one upload in flight until the window ends.
    await Promise.all(
      lanes.map(async (lane) => {
        while (performance.now() < windowEnd) await fire(lane);
      }),
    );
  } else {
    // Open loop: batches are due at a fixed rate; one finding every lane busy is skipped (and counted).
    const batchesPerMs = command.rate / batch / 1000;
    let scheduled = 0;
    let next = 0;
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const now = performance.now();
        if (now >= windowEnd) {
          clearInterval(timer);
          return resolve();
        }
        const due = Math.floor((now - t0) * batchesPerMs) - scheduled;
        for (let i = 0; i < due; i++) {
          scheduled++;
          let lane: Lane | undefined;
          for (let k = 0; k < lanes.length && !lane; k++) {
            const candidate = lanes[(next + k) % lanes.length]!;
            if (!candidate.busy) lane = candidate;
          }
          if (!lane) {
            if (inWindow(now)) skippedBatches++;
            continue;
          }
          next = (lanes.indexOf(lane) + 1) % lanes.length;
          void fire(lane);
        }
      }, 1);
    });
  }
  clearInterval(alarmTimer);
  cpuAtEnd ??= process.cpuUsage(cpuAtStart);
  clearInterval(cpuMark);
  const windowMs = command.rounds !== undefined ? performance.now() - t0 : command.durationMs;

  // Let uploads in flight finish (bounded), then give the subscriber a moment for the last frames.
  const drainDeadline = performance.now() + 15_000;
  while (inFlight.size > 0 && performance.now() < drainDeadline) await Promise.race([...inFlight, new Promise((r) => setTimeout(r, 100))]);
  if (subscriber) await new Promise((r) => setTimeout(r, 500));

  let undelivered = 0;
  if (measure) for (const sent of sentAt.values()) if (sent >= windowStart && sent < windowEnd) undelivered++;
  subscriber?.close();
  for (const socket of sockets) socket.close();
  agent.destroy();
  alarmAgent.destroy();
  const cpu = cpuAtEnd.user + cpuAtEnd.system;
  return {
    windowMs,
    ackedPoses,
    ackedRequests,
    skippedBatches,
    errors,
    errorSamples,
    ackMs: summarise(ackSamples),
    deliveredPositions,
    deliveryMs: summarise(deliverySamples),
    undelivered,
    alarmsSent,
    alarmsReceived,
    geofenceEvents,
    alarmMs: summarise(alarmSamples),
    generatorCpu: cpu / 1000 / windowMs,
  };
}

// Child-process entry: one command at a time over IPC.
if (process.send) {
  process.on('message', (message: { id: number; command: LoadCommand }) => {
    run(message.command).then(
      (result) => process.send!({ id: message.id, result }),
      (error: Error) => process.send!({ id: message.id, error: error.stack ?? String(error) }),
    );
  });
  process.on('disconnect', () => process.exit(0));
}
