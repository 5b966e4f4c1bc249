import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { us_listen_socket } from 'uWebSockets.js';
import { loadNativeUws } from '../gateway/http/uws.js';
import { createVenue, squareCartesians } from '../testkit/cartography.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, login } from '../testkit/identity.js';
import type { RunningGateway } from '../testkit/test-gateway.js';
import type { LoadCommand, LoadResult } from './load-generator.js';

/** The load generator in its own process (see load-generator.ts): one command at a time, each time-bounded. */
export class LoadGenerator {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (result: LoadResult) => void; reject: (error: Error) => void }>();

  private constructor(private readonly child: ChildProcess) {
    child.on('message', (message: { id: number; result?: LoadResult; error?: string }) => {
      const waiter = this.waiting.get(message.id);
      if (!waiter) return;
      this.waiting.delete(message.id);
      if (message.error) waiter.reject(new Error(`load generator: ${message.error}`));
      else waiter.resolve(message.result!);
    });
    child.on('exit', (code) => {
      for (const waiter of this.waiting.values()) waiter.reject(new Error(`load generator exited (${code})`));
      this.waiting.clear();
    });
  }

  static start(): LoadGenerator {
    const entry = fileURLToPath(new URL('./load-generator.ts', import.meta.url));
    return new LoadGenerator(fork(entry, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }));
  }

  run(command: LoadCommand): Promise<LoadResult> {
    const id = this.nextId++;
    const limitMs = command.warmupMs + command.durationMs + 60_000;
    return new Promise<LoadResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`load generator run ${id} exceeded ${limitMs} ms`));
      }, limitMs);
      this.waiting.set(id, {
        resolve: (result) => (clearTimeout(timer), resolve(result)),
        reject: (error) => (clearTimeout(timer), reject(error)),
      });
      this.child.send({ id, command });
    });
  }

  stop(): void {
    if (this.child.connected) this.child.disconnect(); // the child exits on disconnect
    setTimeout(() => {
      if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill();
    }, 2000).unref();
  }
}

let gcFunction: (() => void) | undefined;
/** Full collections with pauses (finalisers, freed pages), so memory figures compare settled states. */
export async function settledGc(): Promise<void> {
  if (!gcFunction) {
    setFlagsFromString('--expose-gc');
    gcFunction = runInNewContext('gc') as () => void;
  }
  // Settle first (requests finishing, timers), then collect: a reading right after the last gc() holds no
  // garbage made while waiting, which otherwise moved a per-device figure by a kilobyte either way.
  for (let i = 0; i < 3; i++) {
    await new Promise((resolve) => setTimeout(resolve, 400));
    gcFunction();
  }
}

/**
 * The bare uWebSockets.js ceiling: an app whose POST handler only reads the body, JSON.parse()s it and answers
 * 204. Same native binary as the gateway, same process, its own port.
 */
export async function startBareUws(): Promise<{ url: string; parsedPoses: () => number; stop: () => void }> {
  const uws = loadNativeUws();
  const app = uws.App();
  let parsed = 0;
  app.post('/*', (res) => {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const chunks: Buffer[] = [];
    res.onData((chunk, isLast) => {
      chunks.push(Buffer.from(new Uint8Array(chunk).slice())); // uWS reuses the chunk's memory: copy, as the gateway does
      if (!isLast) return;
      const body = JSON.parse((chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString('utf8')) as { poses?: unknown[] };
      parsed += body.poses?.length ?? 0;
      if (!aborted) res.cork(() => res.writeStatus('204 No Content').end());
    });
  });
  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) =>
    app.listen('127.0.0.1', 0, (socket) => (socket ? resolve(socket) : reject(new Error('bare uWS: cannot listen')))),
  );
  const port = uws.us_socket_local_port(listenSocket);
  return {
    url: `http://127.0.0.1:${port}/api/v1/realtime/positions`,
    parsedPoses: () => parsed,
    stop: () => uws.us_listen_socket_close(listenSocket),
  };
}

export interface BenchVenue {
  token: string;
  organizationId: string;
  buildingId: number;
  floorId: number;
  width: number;
  length: number;
  uploadUrl: string;
  wsUrl: string;
}

/**
 * The createVenue building (120 m x 80 m) with `geofences` 2.5 m squares spread evenly over its ground floor
 * on a 3 m x 3.2 m pitch (a 40 x 25 grid for 1,000), created through the API like an operator would.
 */
export async function setupVenue(
  running: RunningGateway,
  options: { geofences: number; name: string; maxStayTime?: number },
): Promise<BenchVenue> {
  const token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
  const admin = running.client.withToken(token);
  const { building, floors } = await createVenue(admin, options.name);
  const organizationId: string = (await admin.get('/api/v1/organizations/current_organization')).body.id;
  const width = 120;
  const length = 80;
  const columns = Math.ceil(Math.sqrt((options.geofences * width) / length));
  const pitchX = width / columns;
  const pitchY = length / Math.ceil(options.geofences / columns);
  const size = Math.min(pitchX, pitchY) * 0.8;
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < options.geofences; i = next++) {
      const x = (i % columns) * pitchX + (pitchX - size) / 2;
      const y = Math.floor(i / columns) * pitchY + (pitchY - size) / 2;
      const response = await admin.post('/api/v1/geofences', {
        name: `Zone ${i}`,
        building_id: building.id,
        floor_id: floors[0].id,
        type: 'POLYGON',
        cartesians: squareCartesians(Math.round(x * 100) / 100, Math.round(y * 100) / 100, Math.round(size * 100) / 100),
        ...(options.maxStayTime ? { max_stay_time: options.maxStayTime } : {}),
      });
      if (response.status !== 201) throw new Error(`geofence ${i}: ${response.status} ${response.text}`);
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return {
    token,
    organizationId,
    buildingId: building.id,
    floorId: floors[0].id,
    width,
    length,
    uploadUrl: `${running.baseUrl}/api/v1/realtime/positions`,
    wsUrl: `${running.baseUrl.replace(/^http/, 'ws')}/api/v1/ws`,
  };
}

/** Rounds a rate down to a step, for offered loads that read well in a metric name. */
export const roundRate = (rate: number, step = 500) => Math.max(step, Math.floor(rate / step) * step);

export const formatRate = (rate: number) => Math.round(rate).toLocaleString('en-US');
