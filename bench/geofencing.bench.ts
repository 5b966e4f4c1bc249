import { STAGE_STEPS, type SkippableStage } from '../gateway/pipeline/position-pipeline.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, login } from '../testkit/identity.js';
import { startTestGateway, type RunningGateway } from '../testkit/test-gateway.js';
import { startStageProfile, type Figure, type Scenario } from './harness.js';
import { LoadGenerator, formatRate } from './load-client.js';
import { MATERIALIZER_VARIANT, materializerOnOff } from './materializer-load.js';
import { seededRandom, type LoadCommand, type LoadResult, type VenueSpec } from './load-generator.js';

const SCENARIO = 'geofencing';
const FLOOR_M = 200;
const DEVICES = 2000;
const BATCH = 100;
const SEED = Number(process.env.BENCH_SEED ?? 15);
/** Fence counts to run; BENCH_FENCES="1000" runs one. */
const FENCE_COUNTS = (process.env.BENCH_FENCES ?? '1000,10000').split(',').map(Number);
/** Concurrent uploads in flight (each lane owns its devices); BENCH_LANES overrides. */
const LANES = Number(process.env.BENCH_LANES ?? 32);
const WS_SOCKETS = Math.min(8, LANES);
/** Measured seconds of each closed-loop run (after 1 s of warm-up); BENCH_SECONDS overrides. */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
/**
 * How the subscriber takes the events: `batched` (a frame per upload and building, `?events=batched`, as a
 * control room following a busy building should) or `single` (a frame per event, the default of the protocol).
 */
const EVENT_FRAMES = process.env.BENCH_EVENT_FRAMES ?? 'batched';
if (EVENT_FRAMES !== 'batched' && EVENT_FRAMES !== 'single') throw new Error('BENCH_EVENT_FRAMES must be batched or single');
/**
 * Issue 33's floors: the gateway is run once per BENCH_SKIP_STAGE in this list (`none` is Floorcast whole), on one
 * database and venue, in BENCH_STAGE_ROUNDS rounds whose order alternates, so each stage's cost is a figure of
 * one sitting: Floorcast whole against itself without storing, without the bus, without detection.
 */
const STAGES = (process.env.BENCH_STAGES ?? 'none').split(',').map((stage) => stage.trim()) as SkippableStage[];
for (const stage of STAGES)
  if (!(stage in STAGE_STEPS)) throw new Error(`BENCH_STAGES: ${stage} is not one of ${Object.keys(STAGE_STEPS)}`);
const STAGE_ROUNDS = Number(process.env.BENCH_STAGE_ROUNDS ?? 1);

/** A rectangle of sides `w` x `h` centred on (cx, cy), turned by `angle`, as a closed ring of floor metres. */
export function rotatedRectangle(cx: number, cy: number, w: number, h: number, angle: number): [number, number][] {
  const cos = Math.cos(angle);
  const sin = Math.sin(angle);
  const corners: [number, number][] = [
    [-w / 2, -h / 2],
    [w / 2, -h / 2],
    [w / 2, h / 2],
    [-w / 2, h / 2],
  ].map(([dx, dy]) => [Math.round((cx + dx! * cos - dy! * sin) * 1000) / 1000, Math.round((cy + dx! * sin + dy! * cos) * 1000) / 1000]);
  return [...corners, corners[0]!];
}

interface GeofencingVenue {
  token: string;
  buildingId: number;
  floorId: number;
}

/**
 * The workload of issue 15: one 200 m x 200 m floor (rotation 0) with `fences` rotated rectangles, sides 4-20 m,
 * centres uniform in 10-190 m, from a seeded generator; created through the API as an operator would.
 */
async function setupGeofencingVenue(running: RunningGateway, fences: number): Promise<GeofencingVenue> {
  const token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
  const admin = running.client.withToken(token);
  const building = await admin.post('/api/v1/buildings', {
    name: `Geofencing ${fences}`,
    location: { lat: 40.4168, lng: -3.7038 },
    dimensions: { width: FLOOR_M, length: FLOOR_M },
    rotation: 0,
  });
  if (building.status !== 201) throw new Error(`building: ${building.status} ${building.text}`);
  const floor = await admin.post('/api/v1/floors', { building_id: building.body.id, level: 0, name: 'Ground' });
  if (floor.status !== 201) throw new Error(`floor: ${floor.status} ${floor.text}`);
  const random = seededRandom(SEED * 7919 + fences);
  const shapes = Array.from({ length: fences }, () =>
    rotatedRectangle(10 + random() * 180, 10 + random() * 180, 4 + random() * 16, 4 + random() * 16, random() * Math.PI),
  );
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < fences; i = next++) {
      const response = await admin.post('/api/v1/geofences', {
        name: `Fence ${i}`,
        building_id: building.body.id,
        floor_id: floor.body.id,
        type: 'POLYGON',
        cartesians: shapes[i],
      });
      if (response.status !== 201) throw new Error(`geofence ${i}: ${response.status} ${response.text}`);
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return { token, buildingId: building.body.id, floorId: floor.body.id };
}

/**
 * The workload's fences in one building (past GEOFENCES_MAX_PER_BUILDING's default of 2,000). Comparing stages,
 * an upload waits up to a minute for detection to catch up instead of 2 s: with storing skipped, uploads outrun
 * the detectors, and the figure is then detection's pace rather than refused uploads.
 */
function gatewaySettings(fences: number): Record<string, string> {
  const comparing = STAGES.length > 1 || STAGE_ROUNDS > 1;
  return {
    LOG_LEVEL: 'silent',
    GEOFENCES_MAX_PER_BUILDING: String(Math.max(2000, fences)),
    ...(comparing ? { CLUSTER_BACKLOG_WAIT_MS: '60000' } : {}),
  };
}

const mean = (values: number[]) => values.reduce((total, value) => total + value, 0) / values.length;

interface Measured {
  positionsPerSecond: number;
  eventsPerSecond: number;
  eventsPerPosition: number;
  /** CPU of this process (the gateway; the load generator is a child) per acknowledged position. */
  gatewayCpuUsPerPosition: number;
  result: LoadResult;
}

/**
 * Issue 15: the dedicated in-memory geofencing server's workload, on Floorcast storing every position. 2,000
 * devices random-walking (±1 m per step, clamped to the floor), poses in batches of 100 over several
 * connections with several uploads in flight, each device's first position uploaded before timing starts; a
 * position counts once acknowledged (stored); one WebSocket subscriber of the building's geofence events gets
 * every enter/exit (BENCH_EVENT_FRAMES: in a frame per upload, or per event). Run at 1,000 and 10,000 fences,
 * over HTTP and over WebSocket upload.
 */
export const geofencingScenario: Scenario = {
  name: SCENARIO,
  async run(): Promise<Figure[]> {
    const figures: Figure[] = [];
    const add = (figure: Omit<Figure, 'scenario'>) => figures.push({ scenario: SCENARIO, ...figure });
    const log = (line: string) => process.stdout.write(`  ${line}\n`);
    const perFence: { fences: number; http: Measured; ws: Measured }[] = [];
    for (const fences of FENCE_COUNTS) {
      // Round r runs the stages in order, or backwards when r is odd.
      const order = Array.from({ length: STAGE_ROUNDS }, (_, round) => (round % 2 === 0 ? STAGES : [...STAGES].reverse())).flat();
      let running = await startTestGateway({ ...gatewaySettings(fences), BENCH_SKIP_STAGE: order[0]! });
      const generator = LoadGenerator.start();
      const byStage = new Map<SkippableStage, { http: number[]; ws: number[]; httpCpu: number[]; wsCpu: number[] }>();
      try {
        const started = performance.now();
        const venue = await setupGeofencingVenue(running, fences);
        log(
          `${formatRate(fences)} fences created in ${((performance.now() - started) / 1000).toFixed(1)} s; the subscriber takes ${EVENT_FRAMES} event frames`,
        );
        // Of the gateway running now (each stage's gateway listens on a port of its own).
        const wsUrl = () => `${running.baseUrl.replace(/^http/, 'ws')}/api/v1/ws`;
        const fleet = (prefix: string): VenueSpec => ({
          buildingId: venue.buildingId,
          floorId: venue.floorId,
          devicePrefix: prefix,
          devices: DEVICES,
          width: FLOOR_M,
          length: FLOOR_M,
          walk: { kind: 'random', seed: SEED, stepM: 1 },
        });
        const http = () => ({ type: 'http' as const, url: `${running.baseUrl}/api/v1/realtime/positions`, token: venue.token });
        const ws = () => ({ type: 'ws' as const, url: wsUrl(), token: venue.token, sockets: WS_SOCKETS });
        const subscriber = () => ({
          url: `${wsUrl()}?events=${EVENT_FRAMES}`,
          token: venue.token,
          geofenceEventsTopic: `buildings/${venue.buildingId}/geofence-events`,
          measure: false,
        });
        const measure = async (label: string, target: LoadCommand['target'], prefix: string): Promise<Measured> => {
          const base = { venue: fleet(prefix), batch: BATCH, lanes: LANES };
          // Each device's first position, before timing starts (it enters its first fences here).
          await generator.run({ ...base, target: http(), rounds: 1, warmupMs: 0, durationMs: 0 });
          const cpuBefore = process.cpuUsage();
          const profile = await startStageProfile(SCENARIO, `F=${fences} ${label}`); // BENCH_PROFILE=1 only
          const result = await generator.run({ ...base, target, warmupMs: 1000, durationMs: SECONDS * 1000, subscribe: subscriber() });
          const cpu = process.cpuUsage(cpuBefore);
          figures.push(
            ...((await profile?.finish({
              positions: result.ackedPoses,
              events: result.geofenceEvents,
              warmupMs: 1000,
              windowMs: result.windowMs,
            })) ?? []),
          );
          if (result.errors > 0) {
            log(`${label}: ${result.errors} failed uploads, e.g. ${result.errorSamples.join(' | ')}`);
            add({ metric: `F=${fences} ${label}: failed uploads`, value: result.errors, unit: 'requests', target: '0', met: false });
          }
          const positionsPerSecond = (result.ackedPoses * 1000) / result.windowMs;
          const eventsPerSecond = (result.geofenceEvents * 1000) / result.windowMs;
          // The whole run's CPU (warm-up and drain included) over the positions acknowledged in the window: an upper bound.
          const gatewayCpuUsPerPosition = (cpu.user + cpu.system) / Math.max(1, result.ackedPoses);
          const measured = {
            positionsPerSecond,
            eventsPerSecond,
            eventsPerPosition: eventsPerSecond / Math.max(1, positionsPerSecond),
            gatewayCpuUsPerPosition,
            result,
          };
          log(
            `F=${formatRate(fences)} ${label}: ${formatRate(positionsPerSecond)} pos/s, ${formatRate(eventsPerSecond)} enter/exit/s (${measured.eventsPerPosition.toFixed(2)} per position), ack p99 ${result.ackMs.p99?.toFixed(1)} ms, gateway CPU ${gatewayCpuUsPerPosition.toFixed(1)} µs/position, generator CPU ${(result.generatorCpu * 100).toFixed(0)}%`,
          );
          return measured;
        };
        if (MATERIALIZER_VARIANT) {
          // Off and on back to back (materializer-load.ts), instead of the figures below.
          const acked = (m: Measured) => ({ positionsPerSecond: m.positionsPerSecond, acked: m.result.ackedPoses });
          const protocols = [
            { label: 'HTTP', run: async () => acked(await measure(`HTTP (${LANES} uploads in flight)`, http(), 'h-')) },
            {
              label: 'WebSocket upload',
              run: async () => acked(await measure(`WebSocket (${WS_SOCKETS} sockets, ${LANES} uploads in flight)`, ws(), 'w-')),
            },
          ];
          for (const figure of await materializerOnOff(running, fences, DEVICES, venue.buildingId, protocols, log)) add(figure);
          continue;
        }
        let overHttp: Measured | undefined;
        let overWs: Measured | undefined;
        for (const [run, stage] of order.entries()) {
          if (run > 0) {
            // The same database and venue, a gateway without this stage (devices and detector state start afresh),
            // on Redis keys of its own (removed with the environment's): the last gateway's shard streams hold
            // uploads it handed to itself, which a new member would first have to detect.
            const { environment } = running;
            await running.gateway.close();
            const prefix = environment.env.REDIS_PREFIX;
            const redis: Record<string, string> = prefix === undefined ? {} : { REDIS_PREFIX: `${prefix}-${run}` };
            running = await startTestGateway({ ...gatewaySettings(fences), BENCH_SKIP_STAGE: stage, ...redis }, {}, environment);
          }
          const skipping = stage === 'none' ? '' : `, ${stage} skipped`;
          const prefix = `${stage[0]}${run}`;
          const h = await measure(`HTTP (${LANES} uploads in flight)${skipping}`, http(), `${prefix}h-`);
          const w = await measure(`WebSocket (${WS_SOCKETS} sockets, ${LANES} uploads in flight)${skipping}`, ws(), `${prefix}w-`);
          const runs = byStage.get(stage) ?? { http: [], ws: [], httpCpu: [], wsCpu: [] };
          runs.http.push(h.positionsPerSecond);
          runs.ws.push(w.positionsPerSecond);
          runs.httpCpu.push(h.gatewayCpuUsPerPosition);
          runs.wsCpu.push(w.gatewayCpuUsPerPosition);
          byStage.set(stage, runs);
          if (stage === 'none' && !overHttp) [overHttp, overWs] = [h, w];
        }
        if (STAGES.length > 1 || STAGE_ROUNDS > 1) {
          const whole = byStage.get('none');
          for (const [stage, runs] of byStage) {
            // The mean of the rounds: with two, a median would be the slower one alone.
            const ratio = (values: number[], of?: number[]) => (of ? ` (${(mean(values) / mean(of)).toFixed(2)}x whole)` : '');
            log(
              `F=${formatRate(fences)} ${stage === 'none' ? 'whole' : `${stage} skipped`}: HTTP ${runs.http.map(formatRate).join(' / ')} pos/s${ratio(runs.http, whole?.http)}, ${mean(runs.httpCpu).toFixed(1)} µs/position; WebSocket ${runs.ws.map(formatRate).join(' / ')}${ratio(runs.ws, whole?.ws)}, ${mean(runs.wsCpu).toFixed(1)} µs/position`,
            );
            for (const [label, values] of [
              ['HTTP', runs.http],
              ['WebSocket upload', runs.ws],
            ] as const)
              add({
                metric: `F=${fences}: acknowledged positions over ${label}, ${stage === 'none' ? 'whole' : `${stage} skipped`} (mean of ${values.length})`,
                value: mean(values),
                unit: 'pos/s',
              });
          }
        }
        if (!overHttp || !overWs) continue; // BENCH_STAGES without none: the floors only
        perFence.push({ fences, http: overHttp, ws: overWs });
        const positionTarget = fences <= 1000 ? { target: '>= 40,000 pos/s (peer in memory: 40,500)' } : {};
        const eventTarget = fences >= 10_000 ? { target: '>= 40,000 events/s (peer: ~25,000)' } : {};
        for (const [label, m] of [
          ['HTTP', overHttp],
          ['WebSocket upload', overWs],
        ] as const) {
          add({
            metric: `F=${fences}: acknowledged positions over ${label}`,
            value: m.positionsPerSecond,
            unit: 'pos/s',
            ...positionTarget,
            ...(fences <= 1000 ? { met: m.positionsPerSecond >= 40_000 } : {}),
          });
          add({
            metric: `F=${fences}: enter/exit events stored and pushed, ${label}`,
            value: m.eventsPerSecond,
            unit: 'events/s',
            ...eventTarget,
            ...(fences >= 10_000 ? { met: m.eventsPerSecond >= 40_000 } : {}),
          });
          add({
            metric: `F=${fences}: gateway CPU per position, ${label} (${m.eventsPerPosition.toFixed(2)} events/position)`,
            value: m.gatewayCpuUsPerPosition,
            unit: 'µs',
          });
        }
      } finally {
        generator.stop();
        await running.stop();
      }
    }
    // Fitted over the fence counts: CPU per position = a + b x events per position (HTTP runs).
    if (perFence.length >= 2) {
      const [low, high] = [perFence[0]!.http, perFence[perFence.length - 1]!.http];
      const perEvent = (high.gatewayCpuUsPerPosition - low.gatewayCpuUsPerPosition) / (high.eventsPerPosition - low.eventsPerPosition);
      const perPosition = low.gatewayCpuUsPerPosition - perEvent * low.eventsPerPosition;
      add({ metric: 'fitted gateway CPU per position (no events), HTTP', value: perPosition, unit: 'µs' });
      add({ metric: 'fitted gateway CPU per enter/exit event, HTTP', value: perEvent, unit: 'µs' });
    }
    return figures;
  },
};
