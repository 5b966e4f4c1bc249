import WebSocket from 'ws';
import { createVenue } from '../testkit/cartography.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, login } from '../testkit/identity.js';
import { startTestGateway } from '../testkit/test-gateway.js';
import { assemblyPointBody, DEFAULT_MUSTER_SIM, MusterSimulation, type SimPose } from '../testkit/muster-simulation.js';
import { summarise, type Figure, type Scenario } from './harness.js';
import { formatRate, LoadGenerator } from './load-client.js';
import type { LoadResult } from './load-generator.js';

const SCENARIO = 'muster';
/** People on the roll: the simulation's walkers and stayers, the rest a crowd that keeps reporting inside. */
const ROLL = Number(process.env.BENCH_MUSTER_ROLL ?? 5000);
/** The crowd's positions/s during the evacuation (issue 31 names 20,000/s; what one 2-core box can offer beside the gateway). */
const RATE = Number(process.env.BENCH_MUSTER_RATE ?? 5000);
/** The simulation replayed in real time compressed: one of its ticks every this many ms, fix times = send times. */
const TICK_MS = Number(process.env.BENCH_MUSTER_TICK_MS ?? 200);
/** Reads of the roll (GET .../evacuations/current) after the load, for its latency at rest. */
const IDLE_READS = Number(process.env.BENCH_MUSTER_READS ?? 10);
const TARGET_SAFE_P99_MS = 1000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Issue 31's targets: a roll of 5,000 people in a building under load shows a person safe within 1 s (p99) of the
 * fix that reached the assembly point, and the roll stays quick to read with 5,000 entries. The roll is the
 * mustering simulation's 200 people (testkit/muster-simulation.ts: walkers at their own speeds to two points,
 * three who stay) and a crowd of 4,800 devices circling inside, uploaded by the load generator (its own process)
 * at BENCH_MUSTER_RATE while the simulation is replayed in real time, compressed (BENCH_MUSTER_TICK_MS a tick).
 * A subscriber of `buildings/{id}/evacuation` takes each `safe` frame; its latency is from the upload of the
 * pose the simulation saw first inside the point. The roll is read once a second during the load and
 * BENCH_MUSTER_READS times after it (4,800 of its entries still missing, each with its last place), then as many
 * times with `status=safe`, as a screen of the counts, the missing and each assembly point's arrivals reads it.
 */
export const musterScenario: Scenario = {
  name: SCENARIO,
  async run(): Promise<Figure[]> {
    const figures: Figure[] = [];
    const add = (figure: Omit<Figure, 'scenario'>) => figures.push({ scenario: SCENARIO, ...figure });
    const log = (line: string) => process.stdout.write(`  ${line}\n`);
    const sim = new MusterSimulation(DEFAULT_MUSTER_SIM);
    const crowd = ROLL - sim.people.length;
    const running = await startTestGateway({ LOG_LEVEL: 'silent' });
    const generator = LoadGenerator.start();
    let socket: WebSocket | undefined;
    try {
      const token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
      const admin = running.client.withToken(token);
      const venue = await createVenue(admin, 'Bench muster venue');
      const building = venue.building.id;
      const third = await admin.post('/api/v1/floors', { building_id: building, level: 2, level_height: 4.5, name: 'Second' });
      const floors = [venue.floors[0].id, venue.floors[1].id, third.body.id];
      for (const point of sim.options.points) {
        const created = await admin.post('/api/v1/geofences', assemblyPointBody(point, building, floors[0]));
        if (created.status !== 201) throw new Error(`assembly point: ${created.status} ${created.text}`);
      }
      const upload = async (poses: readonly SimPose[]) => {
        const timestamp = Date.now();
        const response = await admin.post('/api/v1/realtime/positions', {
          poses: poses.map((pose) => ({
            device_id: pose.device,
            user_id: pose.user,
            timestamp,
            building_id: building,
            floor_id: floors[pose.floor],
            x: pose.x,
            y: pose.y,
          })),
        });
        if (response.status !== 204) throw new Error(`upload: ${response.status} ${response.text}`);
      };
      const http = { type: 'http' as const, url: `${running.baseUrl}/api/v1/realtime/positions`, token };
      const fleet = { buildingId: building, floorId: floors[0]!, devicePrefix: 'crowd-', devices: crowd, width: 120, length: 80 };

      // Everyone present before the declaration: the crowd's first fixes, then the simulation's people.
      await generator.run({ target: http, venue: fleet, lanes: 8, batch: 500, rounds: 1, warmupMs: 0, durationMs: 0 });
      await upload(sim.startPoses());
      const declared = await admin.post(`/api/v1/buildings/${building}/evacuations`, { drill: true, note: 'Bench drill' });
      if (declared.status !== 201) throw new Error(`declare: ${declared.status} ${declared.text}`);
      log(`roll: ${declared.body.counts.on_roll} people (${crowd} crowd + ${sim.people.length} simulated)`);
      add({ metric: 'people on the roll', value: declared.body.counts.on_roll, unit: 'people' });

      // The subscriber: the time each person's safe frame arrives.
      const safeAt = new Map<string, number>();
      socket = new WebSocket(`${running.baseUrl.replace(/^http/, 'ws')}/api/v1/ws`, { headers: { authorization: `Bearer ${token}` } });
      await new Promise<void>((resolve, reject) => {
        socket!.once('error', reject);
        socket!.on('message', (data) => {
          const frame = JSON.parse(String(data));
          if (frame.op === 'subscribed') resolve();
          if (frame.op === 'evacuation' && frame.data.kind === 'entry' && frame.data.entry.status === 'safe')
            safeAt.set(frame.data.entry.entry, performance.now());
        });
        socket!.once('open', () => socket!.send(JSON.stringify({ op: 'subscribe', topics: [`buildings/${building}/evacuation`] })));
      });

      // The crowd's load runs in the generator's process while this one replays the walk and reads the roll.
      const ticks = [...sim.ticks()];
      const windowMs = (ticks.length + 5) * TICK_MS + 1000;
      const load: Promise<LoadResult> = generator.run({
        target: http,
        venue: fleet,
        lanes: 16,
        batch: 100,
        rate: RATE,
        warmupMs: 1000,
        durationMs: windowMs,
      });
      await sleep(1000);
      const sentAt = new Map<string, number>();
      const readsUnderLoad: number[] = [];
      let reading = true;
      const reader = (async () => {
        while (reading) {
          const started = performance.now();
          const response = await admin.get(`/api/v1/buildings/${building}/evacuations/current`);
          if (response.status !== 200) throw new Error(`roll: ${response.status}`);
          readsUnderLoad.push(performance.now() - started);
          await sleep(1000);
        }
      })();
      let tick = 0;
      for (const poses of ticks) {
        const started = performance.now();
        await upload(poses);
        tick++;
        for (const pose of poses) {
          const arrival = sim.arrivals.get(pose.device);
          if (arrival && arrival.offsetMs === pose.offsetMs && !sentAt.has(pose.device)) sentAt.set(pose.device, started);
        }
        await sleep(Math.max(0, TICK_MS - (performance.now() - started)));
      }
      const result = await load;
      reading = false;
      await reader;
      // The last frames may still be on their way: bounded.
      const keyOf = new Map(sim.people.map((person) => [person.device, `user:${person.user}`]));
      for (let waited = 0; safeAt.size < sentAt.size && waited < 10_000; waited += 100) await sleep(100);
      const latencies = [...sentAt].flatMap(([device, sent]) => {
        const at = safeAt.get(keyOf.get(device)!);
        return at === undefined ? [] : [at - sent];
      });
      const safe = summarise(latencies);
      const achieved = (result.ackedPoses * 1000) / result.windowMs;
      log(
        `load: offered ${formatRate(RATE)} pos/s, achieved ${formatRate(achieved)} (ack p99 ${result.ackMs.p99.toFixed(0)} ms, ${result.errors} failed, ${result.skippedBatches} batches skipped); simulation: ${tick} ticks, ${sentAt.size} arrivals, ${safeAt.size} safe frames`,
      );
      log(
        `fix in the point to safe frame: p50 ${safe.p50.toFixed(0)} p99 ${safe.p99.toFixed(0)} max ${safe.max.toFixed(0)} ms (n=${safe.n})`,
      );
      add({ metric: 'crowd load offered', value: RATE, unit: 'pos/s' });
      add({ metric: 'crowd load achieved', value: achieved, unit: 'pos/s' });
      add({
        metric: 'safe frames received / arrivals',
        value: safe.n / Math.max(1, sentAt.size),
        unit: 'ratio',
        target: '1',
        met: safe.n === sentAt.size,
      });
      add({ metric: 'fix in the point to safe frame, p50', value: safe.p50, unit: 'ms' });
      add({
        metric: `fix in the point to safe frame, p99 (at ${formatRate(achieved)} pos/s)`,
        value: safe.p99,
        unit: 'ms',
        target: `< ${TARGET_SAFE_P99_MS} ms`,
        met: safe.p99 < TARGET_SAFE_P99_MS,
      });

      const underLoad = summarise(readsUnderLoad);
      const idle: number[] = [];
      let bytes = 0;
      let entries = 0;
      for (let read = 0; read < IDLE_READS; read++) {
        const started = performance.now();
        const response = await admin.get(`/api/v1/buildings/${building}/evacuations/current`);
        idle.push(performance.now() - started);
        bytes = response.text.length;
        entries = response.body.roll.length;
      }
      const rest = summarise(idle);
      // What a screen of the counts, the missing and the arrivals at each point asks for (`status=safe`).
      const screen: number[] = [];
      let screenBytes = 0;
      for (let read = 0; read < IDLE_READS; read++) {
        const started = performance.now();
        const response = await admin.get(`/api/v1/buildings/${building}/evacuations/current?status=safe`);
        screen.push(performance.now() - started);
        if (response.status !== 200) throw new Error(`roll: ${response.status}`);
        screenBytes = response.text.length;
      }
      const atScreen = summarise(screen);
      log(
        `GET of the roll (${entries} entries, ${(bytes / 1e6).toFixed(1)} MB): under load p50 ${underLoad.p50.toFixed(0)} p99 ${underLoad.p99.toFixed(0)} ms (n=${underLoad.n}); at rest p50 ${rest.p50.toFixed(0)} max ${rest.max.toFixed(0)} ms (n=${rest.n})`,
      );
      add({ metric: `GET roll of ${entries} entries under load, p50`, value: underLoad.p50, unit: 'ms' });
      add({ metric: `GET roll of ${entries} entries under load, max`, value: underLoad.max, unit: 'ms' });
      add({ metric: `GET roll of ${entries} entries at rest, p50`, value: rest.p50, unit: 'ms' });
      add({ metric: 'GET roll answer size', value: bytes / 1e6, unit: 'MB' });
      log(
        `GET ?status=safe (${(screenBytes / 1e6).toFixed(1)} MB): at rest p50 ${atScreen.p50.toFixed(0)} max ${atScreen.max.toFixed(0)} ms (n=${atScreen.n})`,
      );
      add({ metric: 'GET roll ?status=safe at rest, p50', value: atScreen.p50, unit: 'ms' });
      add({ metric: 'GET roll ?status=safe answer size', value: screenBytes / 1e6, unit: 'MB' });
      return figures;
    } finally {
      socket?.close();
      generator.stop();
      await running.stop();
    }
  },
};
