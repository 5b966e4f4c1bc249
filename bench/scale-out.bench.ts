import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parsePrometheus, type Samples } from '../testkit/prometheus.js';
import { TestClient, basicAuth } from '../testkit/http-client.js';
import { createScratchDatabase, deleteRedisPrefix } from '../testkit/test-environment.js';
import { rotatedRectangle } from './geofencing.bench.js';
import { portInUse, processCpuSeconds, startGatewayProcess, strayGateways, type GatewayProcess } from './gateway-processes.js';
import { median, type Figure, type Scenario } from './harness.js';
import { seededRandom } from './load-generator.js';

const SCENARIO = 'scale-out';
/** Gateway counts to run; BENCH_SCALE_GATEWAYS="3" runs one. The largest also runs the takeover. */
const GATEWAY_COUNTS = (process.env.BENCH_SCALE_GATEWAYS ?? '1,2,3').split(',').map(Number);
const BUILDINGS = Number(process.env.BENCH_SCALE_BUILDINGS ?? 24);
const FENCES_PER_BUILDING = Number(process.env.BENCH_SCALE_FENCES ?? 40);
const DEVICES_PER_BUILDING = 50;
/** Positions uploaded in the measured part of each run (after each device's first one). */
const POSITIONS = Number(process.env.BENCH_SCALE_POSITIONS ?? 120_000);
/** `kill -9` of the owner of the most buildings, this many times (with the largest gateway count). */
const KILLS = Number(process.env.BENCH_SCALE_KILLS ?? 5);
/**
 * The floor of scale-out (issue 33): each gateway under its own Redis prefix, so nothing crosses between them (no bus
 * message, no shard stream read by another gateway; each one detects what it was sent). Not a deployment: devices
 * moving between gateways split their detection state. It shows what two gateways cost when they share nothing.
 */
const ISOLATED = process.env.BENCH_SCALE_ISOLATED === '1';
/** One WebSocket per building on gateway 0, subscribed to the building's positions (the pushes count as work). */
const SUBSCRIBERS = process.env.BENCH_SCALE_SUBSCRIBERS === '1';
/** Gateway i listens on BASE + i and serves /metrics on BASE + 50 + i. */
const BASE_PORT = Number(process.env.BENCH_SCALE_PORT ?? 18480);
const FLOOR_M = 60;
const BATCH = 100;
const LANES = 12;
const SEED = 16;
const ADMIN = { email: 'admin@example.test', password: 'admin-password-1' };

const DETECTION_CPU = 'floorcast_detection_cpu_seconds_total';
const DETECTION_POSITIONS = 'floorcast_detection_positions_total';
const OWNED = 'floorcast_cluster_owned_buildings';
const READY = 'floorcast_cluster_ready_buildings';
const MEMBERS = 'floorcast_cluster_members';
/** Bus messages of live positions received from other gateways (issue 33: only for shards followed here). */
const BUS_RECEIVED = 'floorcast_bus_received_total';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (line: string) => process.stdout.write(`  ${line}\n`);
const portsOf = (i: number) => ({ port: BASE_PORT + i, metricsPort: BASE_PORT + 50 + i });

async function scrape(gateway: GatewayProcess): Promise<Samples> {
  return parsePrometheus(await (await fetch(gateway.metricsUrl)).text());
}

interface Venue {
  token: string;
  buildings: { id: number; floorId: number }[];
}

/** BUILDINGS buildings of one organization, each one 60 m x 60 m floor with FENCES_PER_BUILDING rotated rectangles. */
async function createVenue(gateway: GatewayProcess): Promise<Venue> {
  const client = new TestClient(gateway.baseUrl);
  const login = await client.post('/api/v1/auth/access_tokens', undefined, { authorization: basicAuth(ADMIN.email, ADMIN.password) });
  if (login.status !== 200) throw new Error(`login: ${login.status} ${login.text}`);
  const token: string = login.body.access_token;
  const admin = client.withToken(token);
  const random = seededRandom(SEED);
  const buildings: Venue['buildings'] = [];
  for (let b = 0; b < BUILDINGS; b++) {
    const building = await admin.post('/api/v1/buildings', {
      name: `Scale ${b}`,
      location: { lat: 40.4 + b / 100, lng: -3.7 },
      dimensions: { width: FLOOR_M, length: FLOOR_M },
      rotation: 0,
    });
    if (building.status !== 201) throw new Error(`building: ${building.status} ${building.text}`);
    const floor = await admin.post('/api/v1/floors', { building_id: building.body.id, level: 0, name: 'Ground' });
    if (floor.status !== 201) throw new Error(`floor: ${floor.status} ${floor.text}`);
    const shapes = Array.from({ length: FENCES_PER_BUILDING }, () =>
      rotatedRectangle(5 + random() * 50, 5 + random() * 50, 4 + random() * 16, 4 + random() * 16, random() * Math.PI),
    );
    await Promise.all(
      [0, 1, 2, 3].map(async (worker) => {
        for (let i = worker; i < shapes.length; i += 4) {
          const fence = await admin.post('/api/v1/geofences', {
            name: `Fence ${b}-${i}`,
            building_id: building.body.id,
            floor_id: floor.body.id,
            type: 'POLYGON',
            cartesians: shapes[i],
          });
          if (fence.status !== 201) throw new Error(`geofence: ${fence.status} ${fence.text}`);
        }
      }),
    );
    buildings.push({ id: building.body.id, floorId: floor.body.id });
  }
  return { token, buildings };
}

/**
 * The devices (DEVICES_PER_BUILDING per building) and their random walks (±1 m per fix, clamped to the floor).
 * `upload` sends `total` positions, or each device's first one, in batches of BATCH over LANES lanes, each lane
 * owning its devices (so each device's fixes arrive in order) and sending its k-th batch to gateway
 * (lane + k) mod N: every gateway receives positions of every building.
 */
function fleet(venue: Venue) {
  const devices = BUILDINGS * DEVICES_PER_BUILDING;
  const random = seededRandom(SEED * 31);
  const x = Float64Array.from({ length: devices }, () => random() * FLOOR_M);
  const y = Float64Array.from({ length: devices }, () => random() * FLOOR_M);
  const moved = new Uint8Array(devices);
  const owned = Array.from({ length: LANES }, (_, lane) =>
    Array.from({ length: Math.ceil((devices - lane) / LANES) }, (_, k) => lane + k * LANES),
  );
  const cursors = new Array<number>(LANES).fill(0);
  const clocks = new Array<number>(LANES).fill(0);
  const headers = { authorization: `Bearer ${venue.token}`, 'content-type': 'application/json' };

  const upload = async (gateways: GatewayProcess[], total: number | 'first-fixes'): Promise<number> => {
    let sent = 0;
    const lane = async (index: number) => {
      const own = owned[index]!;
      let left = total === 'first-fixes' ? own.length : Infinity;
      for (let k = 0; left > 0 && (total === 'first-fixes' || sent < total); k++) {
        const count = Math.min(BATCH, left, total === 'first-fixes' ? Infinity : total - sent);
        sent += count;
        left -= count;
        // One timestamp per batch, rising per lane: a device's fixes never share one.
        const timestamp = (clocks[index] = Math.max(Date.now(), clocks[index]! + 1));
        const poses: string[] = [];
        for (let p = 0; p < count; p++) {
          const d = own[cursors[index]!++ % own.length]!;
          // A device's first fix is its starting point; each later one moves it.
          if (moved[d]) {
            x[d] = Math.min(FLOOR_M, Math.max(0, x[d]! + random() * 2 - 1));
            y[d] = Math.min(FLOOR_M, Math.max(0, y[d]! + random() * 2 - 1));
          }
          moved[d] = 1;
          const building = venue.buildings[d % BUILDINGS]!;
          poses.push(
            `{"device_id":"scale-${d}","timestamp":${timestamp},"building_id":${building.id},"floor_id":${building.floorId},"x":${x[d]!.toFixed(2)},"y":${y[d]!.toFixed(2)}}`,
          );
        }
        const gateway = gateways[(index + k) % gateways.length]!;
        const response = await fetch(`${gateway.baseUrl}/api/v1/realtime/positions`, {
          method: 'POST',
          headers,
          body: `{"poses":[${poses.join(',')}]}`,
        });
        const text = await response.text();
        if (response.status !== 204) throw new Error(`upload to ${gateway.baseUrl}: ${response.status} ${text}`);
      }
    };
    await Promise.all(Array.from({ length: LANES }, (_, i) => lane(i)));
    return sent;
  };
  return { upload };
}

/** Waits until no gateway used more than 20 ms of CPU in 500 ms (detection behind the acks has drained), at most 60 s. */
async function settle(gateways: GatewayProcess[]): Promise<void> {
  let before = gateways.map((g) => processCpuSeconds(g.pid));
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; ) {
    await sleep(500);
    const now = gateways.map((g) => processCpuSeconds(g.pid));
    if (now.every((cpu, i) => cpu - before[i]! <= 0.02)) return;
    before = now;
  }
  log('gateways still busy after 60 s: figures include what they were still doing');
}

/** One socket per building on `gateway`, subscribed to its positions; `frames()` counts the position frames pushed. */
async function subscribeBuildings(gateway: GatewayProcess, venue: Venue): Promise<{ frames: () => number; close: () => void }> {
  let frames = 0;
  const sockets = await Promise.all(
    venue.buildings.map(
      (building) =>
        new Promise<WebSocket>((resolve, reject) => {
          const ws = new WebSocket(`${gateway.baseUrl.replace(/^http/, 'ws')}/api/v1/ws`, {
            headers: { authorization: `Bearer ${venue.token}` },
          });
          ws.once('error', reject);
          ws.on('message', (data: Buffer) => {
            const frame = JSON.parse(data.toString()) as { op: string; id?: string };
            if (frame.op === 'subscribed') resolve(ws);
            else if (frame.op === 'position' || frame.op === 'positions') frames++;
          });
          ws.once('open', () => ws.send(JSON.stringify({ op: 'subscribe', id: 'sub', topics: [`buildings/${building.id}/positions`] })));
        }),
    ),
  );
  return {
    frames: () => frames,
    close: () => {
      for (const ws of sockets) ws.close();
    },
  };
}

const sumOf = (samples: Samples[], name: string) => samples.reduce((total, s) => total + s.value(name), 0);

/** Polls the gateways' metrics until `done` holds for them, at most `timeoutMs`; the elapsed ms, or undefined. */
async function waitFor(
  gateways: GatewayProcess[],
  done: (samples: Samples[]) => boolean,
  timeoutMs: number,
  since = performance.now(),
): Promise<number | undefined> {
  while (performance.now() - since < timeoutMs) {
    const samples = await Promise.all(gateways.map(scrape)).catch(() => undefined);
    if (samples && done(samples)) return performance.now() - since;
    await sleep(25);
  }
  return undefined;
}

/**
 * Issue 16: N gateway processes on one PostgreSQL + Redis (a fresh database and Redis prefix per N), positions
 * of devices in every building uploaded through every gateway, CPU read per process (/proc) and detection CPU
 * from each gateway's /metrics: partitioned detection shows as detection CPU per position per gateway falling
 * as 1/N with the sum about flat. With the largest N, `kill -9` of the owner of most buildings, timed until the
 * survivors report every building ready again. Figures are CPU time, not wall time (this machine has 2 cores).
 */
export const scaleOutScenario: Scenario = {
  name: SCENARIO,
  async run(): Promise<Figure[]> {
    const figures: Figure[] = [];
    const add = (figure: Omit<Figure, 'scenario'>) => figures.push({ scenario: SCENARIO, ...figure });
    const databaseUrl = process.env.DATABASE_URL;
    const redisUrl = process.env.REDIS_URL;
    if (!databaseUrl || !redisUrl) {
      log('skipped: scale-out needs PostgreSQL and Redis (set DATABASE_URL and REDIS_URL)');
      return figures;
    }
    const strays = strayGateways();
    if (strays.length > 0) log(`gateway processes already running (not ours):\n    ${strays.join('\n    ')}`);
    const maxN = Math.max(...GATEWAY_COUNTS);
    const taken: number[] = [];
    for (let i = 0; i < maxN; i++) for (const port of Object.values(portsOf(i))) if (await portInUse(port)) taken.push(port);
    if (taken.length > 0) {
      log(`refusing to measure: ports ${taken.join(', ')} are in use (BENCH_SCALE_PORT moves the range)`);
      return figures;
    }

    const sums = new Map<number, number>();
    for (const n of GATEWAY_COUNTS) {
      const database = await createScratchDatabase(databaseUrl);
      const prefix = `fcbench:scale:${randomBytes(4).toString('hex')}`;
      const jwtSecret = randomBytes(32).toString('hex');
      const dataDirs: string[] = [];
      const env = (): Record<string, string> => {
        const dataDir = mkdtempSync(join(tmpdir(), 'floorcast-scale-'));
        dataDirs.push(dataDir);
        return {
          DATA_DIR: dataDir,
          LOG_LEVEL: 'warn',
          ADMIN_EMAIL: ADMIN.email,
          ADMIN_PASSWORD: ADMIN.password,
          DATABASE_URL: database.url,
          REDIS_URL: redisUrl,
          REDIS_PREFIX: ISOLATED ? `${prefix}:g${dataDirs.length}` : prefix,
          JWT_SECRET: jwtSecret,
          SHUTDOWN_GRACE_SECONDS: '5',
        };
      };
      const gateways: GatewayProcess[] = [];
      const closers: (() => void)[] = [];
      try {
        // The first one alone migrates the fresh database; the venue exists before the others start.
        gateways.push(await startGatewayProcess(env(), portsOf(0).port, portsOf(0).metricsPort));
        const venue = await createVenue(gateways[0]!);
        for (let i = 1; i < n; i++) gateways.push(await startGatewayProcess(env(), portsOf(i).port, portsOf(i).metricsPort));
        const devices = fleet(venue);
        const watchers = SUBSCRIBERS ? await subscribeBuildings(gateways[0]!, venue) : undefined;
        if (watchers) closers.push(watchers.close);
        await devices.upload(gateways, 'first-fixes');
        await settle(gateways);

        const cpuBefore = gateways.map((g) => processCpuSeconds(g.pid));
        const metricsBefore = await Promise.all(gateways.map(scrape));
        const started = performance.now();
        const uploaded = await devices.upload(gateways, POSITIONS);
        const uploadMs = performance.now() - started;
        await settle(gateways);
        const cpuAfter = gateways.map((g) => processCpuSeconds(g.pid));
        const metricsAfter = await Promise.all(gateways.map(scrape));

        const processUs = gateways.map((_, i) => ((cpuAfter[i]! - cpuBefore[i]!) * 1e6) / uploaded);
        const hasDetection = metricsAfter.every((s) => s.has(DETECTION_CPU));
        const detectionUs = gateways.map(
          (_, i) => ((metricsAfter[i]!.value(DETECTION_CPU) - metricsBefore[i]!.value(DETECTION_CPU)) * 1e6) / uploaded,
        );
        const detectedShare = gateways.map(
          (_, i) => (metricsAfter[i]!.value(DETECTION_POSITIONS) - metricsBefore[i]!.value(DETECTION_POSITIONS)) / uploaded,
        );
        const positionMessages = gateways.map(
          (_, i) =>
            metricsAfter[i]!.value(BUS_RECEIVED, { channel: 'positions' }) -
            metricsBefore[i]!.value(BUS_RECEIVED, { channel: 'positions' }),
        );
        const list = (values: number[], digits = 1) => values.map((v) => v.toFixed(digits)).join(' / ');
        const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
        const mode = [
          ISOLATED ? 'isolated' : '',
          SUBSCRIBERS ? `a subscriber per building on gateway 0 (${watchers?.frames()} frames)` : '',
        ]
          .filter(Boolean)
          .join(', ');
        log(
          `N=${n}: ${uploaded} positions in ${(uploadMs / 1000).toFixed(1)} s through ${n} gateway(s), ${BUILDINGS} buildings${mode ? `, ${mode}` : ''}`,
        );
        log(`  process CPU µs per uploaded position, per gateway: ${list(processUs)} (sum ${sum(processUs).toFixed(1)})`);
        log(`  bus messages of positions received from other gateways, per gateway: ${list(positionMessages, 0)}`);
        if (hasDetection) {
          log(`  detection CPU µs per uploaded position, per gateway: ${list(detectionUs, 2)} (sum ${sum(detectionUs).toFixed(2)})`);
          log(`  share of positions run through detection, per gateway: ${list(detectedShare, 2)}`);
          add({
            metric: `N=${n}: detection CPU per uploaded position, max over gateways`,
            value: Math.max(...detectionUs),
            unit: 'µs',
            target: n > 1 ? '~1/N of N=1' : undefined,
          });
          add({
            metric: `N=${n}: detection CPU per uploaded position, sum over gateways`,
            value: sum(detectionUs),
            unit: 'µs',
            target: n > 1 ? '~flat (N=1 figure)' : undefined,
          });
        } else {
          log(`  detection CPU µs per uploaded position, per gateway: n/a (${DETECTION_CPU} not exported by this gateway)`);
        }
        add({ metric: `N=${n}: process CPU per uploaded position, max over gateways`, value: Math.max(...processUs), unit: 'µs' });
        add({ metric: `N=${n}: process CPU per uploaded position, sum over gateways`, value: sum(processUs), unit: 'µs' });
        if (n > 1)
          add({
            metric: `N=${n}: bus messages of positions received from other gateways${SUBSCRIBERS ? '' : ' (no subscriber)'}`,
            value: sum(positionMessages),
            unit: 'messages',
            target: SUBSCRIBERS ? undefined : '0',
          });
        sums.set(n, sum(processUs));
        if (n > 1 && sums.has(1))
          add({
            metric: `N=${n}: summed process CPU over N=1's, this sitting`,
            value: sum(processUs) / sums.get(1)!,
            unit: '×',
            target: '≤ 1.25',
          });

        if (n === maxN && n >= 2) await measureTakeover(gateways, env, add);
      } finally {
        for (const close of closers) close();
        await Promise.all(gateways.map((g) => g.stop()));
        await database.drop().catch((error: unknown) => log(`dropping the scratch database failed: ${String(error)}`));
        await deleteRedisPrefix(redisUrl, prefix).catch(() => undefined);
        for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
      }
    }
    return figures;
  },
};

/**
 * KILLS times: `kill -9` of the gateway owning the most buildings, the time until the survivors' ready
 * buildings add up to every building again, then a restart of the killed one and a wait for convergence.
 */
async function measureTakeover(
  gateways: GatewayProcess[],
  env: () => Record<string, string>,
  add: (figure: Omit<Figure, 'scenario'>) => void,
): Promise<void> {
  const samples = await Promise.all(gateways.map(scrape));
  if (!samples.every((s) => s.has(OWNED) && s.has(READY))) {
    log(`takeover: n/a (${OWNED} / ${READY} not exported by this gateway)`);
    return;
  }
  const converged = (all: Samples[]) => sumOf(all, READY) === BUILDINGS && all.every((s) => s.value(MEMBERS) === gateways.length);
  if ((await waitFor(gateways, converged, 60_000)) === undefined) {
    log('takeover: the gateways did not converge before the first kill (every building ready, every member seen); not measured');
    return;
  }
  const takeovers: number[] = [];
  for (let kill = 0; kill < KILLS; kill++) {
    const owned = (await Promise.all(gateways.map(scrape))).map((s) => s.value(OWNED));
    const victim = owned.indexOf(Math.max(...owned));
    const survivors = gateways.filter((_, i) => i !== victim);
    const killedAt = performance.now();
    await gateways[victim]!.kill();
    const ms = await waitFor(survivors, (all) => sumOf(all, READY) === BUILDINGS, 60_000, killedAt);
    log(
      `  kill ${kill + 1}: gateway ${victim} owned ${owned[victim]} of ${BUILDINGS} buildings; ${ms === undefined ? 'NOT taken over within 60 s' : `taken over in ${Math.round(ms)} ms`}`,
    );
    if (ms !== undefined) takeovers.push(ms);
    gateways[victim] = await startGatewayProcess(env(), portsOf(victim).port, portsOf(victim).metricsPort);
    if ((await waitFor(gateways, converged, 60_000)) === undefined) {
      log('  the gateways did not converge after the restart; stopping the takeover runs');
      break;
    }
  }
  if (takeovers.length > 0) {
    add({
      metric: `takeover after kill -9 of an owner, median of ${takeovers.length}`,
      value: median(takeovers),
      unit: 'ms',
      target: 'a few seconds',
    });
    add({ metric: `takeover after kill -9 of an owner, max of ${takeovers.length}`, value: Math.max(...takeovers), unit: 'ms' });
  }
  if (takeovers.length < KILLS)
    add({
      metric: 'takeovers not completed within 60 s (or not run)',
      value: KILLS - takeovers.length,
      unit: 'kills',
      target: '0',
      met: false,
    });
}
