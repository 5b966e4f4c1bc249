import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { geofenceStays } from '../shared/reports/stays.js';
import { HOUR_MS } from '../shared/reports/materializer.js';
import { adminClient } from '../test/support/identity.js';
import { startTestGateway } from '../test/support/test-gateway.js';
import { DatabaseCpu } from './materializer-load.js';

/**
 * The stays rebuild alone on dense device-hours (STAYS_DEVICES devices x 3,600 positions at 1 Hz, random walks
 * of ±1 m per step on a 200 m floor with STAYS_FENCES rotated rectangles, as bench/geofencing.bench.ts): CPU µs
 * per position of the database backends (from /proc) and of this process, best of STAYS_REPEATS passes, each in
 * one transaction as the materializer runs it. Writes the kept segments (fence names, times from the hour) to
 * STAYS_DUMP so two builds' can be compared with cmp; STAYS_PROFILE writes a CPU profile of the last pass;
 * STAYS_EXPLAIN (a regular expression) prints EXPLAIN ANALYZE of the statements it matches, in one more pass.
 * Run: `DATABASE_URL=... npx tsx bench/stays-rebuild.ts` (a scratch database, dropped at the end).
 */
const DEVICES = Number(process.env.STAYS_DEVICES ?? 20);
const FENCES = Number(process.env.STAYS_FENCES ?? 1000);
const REPEATS = Number(process.env.STAYS_REPEATS ?? 3);

function seededRandom(seed: number) {
  let state = seed >>> 0;
  return () => ((state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}
function rotatedRectangle(cx: number, cy: number, w: number, h: number, angle: number): [number, number][] {
  const c = Math.cos(angle);
  const s = Math.sin(angle);
  const corners: [number, number][] = [[-w / 2, -h / 2], [w / 2, -h / 2], [w / 2, h / 2], [-w / 2, h / 2]];
  const ring = corners.map(([x, y]) => [Math.round((cx + x * c - y * s) * 1000) / 1000, Math.round((cy + x * s + y * c) * 1000) / 1000] as [number, number]);
  return [...ring, ring[0]!];
}

const running = await startTestGateway({ POSITIONS_MAX_AGE_SECONDS: String(365 * 86_400), REPORTS_MATERIALIZE_INTERVAL_MS: '0' });
try {
  const admin = await adminClient(running.client);
  const storage = running.gateway.services.storage;
  const building = await admin.post('/api/v1/buildings', { name: 'Stays bench', location: { lat: 40.4168, lng: -3.7038 }, dimensions: { width: 200, length: 200 }, rotation: 0 });
  if (building.status !== 201) throw new Error(building.text);
  const floor = await admin.post('/api/v1/floors', { building_id: building.body.id, level: 0, name: 'Ground' });
  const random = seededRandom(7);
  for (let i = 0; i < FENCES; i++) {
    const shape = rotatedRectangle(10 + random() * 180, 10 + random() * 180, 4 + random() * 16, 4 + random() * 16, random() * Math.PI);
    const response = await admin.post('/api/v1/geofences', { name: `Fence ${i}`, building_id: building.body.id, floor_id: floor.body.id, type: 'POLYGON', cartesians: shape });
    if (response.status !== 201) throw new Error(response.text);
  }
  const hour = Math.floor(Date.now() / HOUR_MS) * HOUR_MS - 3 * HOUR_MS;
  for (let d = 0; d < DEVICES; d++) {
    let x = 10 + random() * 180;
    let y = 10 + random() * 180;
    const poses = Array.from({ length: 3600 }, (_, i) => {
      x = Math.min(199, Math.max(1, x + (random() * 2 - 1)));
      y = Math.min(199, Math.max(1, y + (random() * 2 - 1)));
      return { device_id: `d-${String(d).padStart(3, '0')}`, timestamp: hour + i * 1000 + Math.floor(random() * 900), building_id: building.body.id, floor_id: floor.body.id, x, y };
    });
    for (let i = 0; i < poses.length; i += 1000) {
      const response = await admin.post('/api/v1/realtime/positions', { poses: poses.slice(i, i + 1000) });
      if (response.status !== 204) throw new Error(response.text);
    }
  }
  const [org] = await storage.execute<{ organization_id: string }>('select organization_id::text from buildings where id = ?', [building.body.id]);
  const units = Array.from({ length: DEVICES }, (_, d) => ({ organizationId: org!.organization_id, deviceId: `d-${String(d).padStart(3, '0')}`, hour: new Date(hour) }));
  const rows = DEVICES * 3600;
  await storage.execute('analyze positions');
  let best = { db: Infinity, process: Infinity };
  for (let r = 0; r < REPEATS; r++) {
    const session = process.env.STAYS_PROFILE && r === REPEATS - 1 ? new Session() : undefined;
    if (session) {
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.start');
    }
    const db = await DatabaseCpu.sample(storage);
    const before = process.cpuUsage();
    const started = performance.now();
    await storage.em().transactional(async (em) => geofenceStays.rebuild(async (query) => (await em.execute(query.text, query.params as unknown[])) as never, units));
    const cpu = process.cpuUsage(before);
    const run = { db: ((await db.seconds()) * 1e6) / rows, process: ((cpu.user + cpu.system) / rows), wall: ((performance.now() - started) * 1000) / rows };
    console.log(`pass ${r + 1}: DB ${run.db.toFixed(1)} µs, process ${run.process.toFixed(1)} µs, wall ${run.wall.toFixed(1)} µs per position`);
    if (run.db + run.process < best.db + best.process) best = run;
    if (session) {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(process.env.STAYS_PROFILE!, JSON.stringify(profile));
      session.disconnect();
    }
  }
  if (process.env.STAYS_EXPLAIN) {
    // EXPLAIN ANALYZE of the statements matching STAYS_EXPLAIN (a regular expression), in one more pass.
    await geofenceStays.rebuild(async (query) => {
      if (!new RegExp(process.env.STAYS_EXPLAIN!).test(query.text)) return storage.execute(query.text, query.params) as never;
      const plan = await storage.execute<{ 'QUERY PLAN': string }>(`explain (analyze, buffers) ${query.text}`, query.params);
      console.log(plan.map((row) => row['QUERY PLAN']).join('\n').replace(/\{[-0-9,{}]{200,}\}/g, '{...}'));
      return [] as never;
    }, units);
  }
  const kept = await storage.execute<Record<string, unknown>>(
    `select s.device_id, g.name, s.geometry_version, s.user_id::text, s.building_id, extract(epoch from s.first_ts - s.hour) * 1000 as first_ms, extract(epoch from s.last_ts - s.hour) * 1000 as last_ms, s.positions
     from geofence_stays s join geofences g on g.id = s.fence_id order by 1, 2, 6`,
  );
  console.log(`best: DB ${best.db.toFixed(1)} µs + process ${best.process.toFixed(1)} µs per position; ${kept.length} segments`);
  if (process.env.STAYS_DUMP) writeFileSync(process.env.STAYS_DUMP, kept.map((row) => JSON.stringify(row)).join('\n'));
} finally {
  await running.stop();
}
