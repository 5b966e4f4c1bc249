import { createLogger } from '../shared/logger.js';
import { PositionStore } from '../shared/positions/position-store.js';
import { materializations } from '../shared/reports/materializations.js';
import { ReportMaterializer } from '../shared/reports/materializer.js';
import { createVenue, squareCartesians } from '../test/support/cartography.js';
import { adminClient } from '../test/support/identity.js';
import { startTestGateway } from '../test/support/test-gateway.js';
import { medianMs, type Figure, type Scenario } from './harness.js';

/** Each query runs this many times and the median counts: one slow run (a checkpoint, another process) is not the figure. */
const RUNS = Number(process.env.BENCH_REPORT_RUNS ?? 3);


/**
 * Reports over a day of positions (issue target: 100 devices every second = 8.64 million rows, every report
 * within 3 times a plain count(*) over the same rows). The day is generated inside PostgreSQL. On embedded
 * storage the seed is scaled down (BENCH_REPORT_SECONDS, default 3,600 there) and the figure names say so.
 */
export const reportsScenario: Scenario = {
  name: 'reports',
  async run(): Promise<Figure[]> {
    const devices = Number(process.env.BENCH_REPORT_DEVICES ?? 100);
    const seconds = Number(process.env.BENCH_REPORT_SECONDS ?? (process.env.DATABASE_URL ? 86_400 : 3_600));
    // The materializer runs when this scenario says: first every report on the raw path, then after one pass.
    const running = await startTestGateway({ LOG_LEVEL: 'silent', JOB_TIMEOUT_MS: '1800000', REPORTS_MATERIALIZE_INTERVAL_MS: '0' });
    try {
      const { storage } = running.gateway.services;
      const admin = await adminClient(running.client);
      const { building, floors } = await createVenue(admin, 'Report bench');
      for (let i = 0; i < 20; i++) {
        await admin.post('/api/v1/geofences', { name: `Zone ${i}`, building_id: building.id, floor_id: floors[0].id, type: 'POLYGON', cartesians: squareCartesians((i % 5) * 22 + 2, Math.floor(i / 5) * 18 + 2, 15) });
      }
      const organization = (await admin.get('/api/v1/organizations/current_organization')).body.id;
      // The zones were drawn before the day they report on (as in a deployment): their geometry took effect then.
      await storage.execute('update geofences set geometry_since = ?', [new Date(Date.UTC(2026, 0, 1)).toISOString()]);
      const day = Date.UTC(2026, 0, 15);
      await new PositionStore(storage).ensurePartitions([{ timestamp: day } as never, { timestamp: day + seconds * 1000 - 1 } as never]);
      const seedStarted = performance.now();
      // Each device walks a slow loop over the floor; one statement per device keeps transactions small.
      for (let d = 0; d < devices; d++) {
        await storage.execute(
          `insert into positions (organization_id, device_id, user_id, building_id, floor_id, indoor, x, y, lat, lng, yaw, accuracy, ts, received_at)
           select ?::uuid, 'bench-' || ?::text, null, ?::int, ?::int, true,
                  60 + 55 * sin((s + ?::int * 97) / 600.0), 40 + 35 * cos((s + ?::int * 61) / 900.0),
                  40.4168 + s * 1e-9, -3.7038, 0, 2, to_timestamp(?::float8 / 1000 + s), to_timestamp(?::float8 / 1000 + s)
           from generate_series(0, ?::int - 1) as s`,
          [organization, d, building.id, floors[0].id, d, d, day, day, seconds],
        );
      }
      const seedSeconds = (performance.now() - seedStarted) / 1000;
      // A day that has been written is vacuumed by autovacuum before anyone reports on it: hint bits and the
      // visibility map set. Without this, the first scan (whichever query it is) pays for setting them.
      await storage.execute('vacuum analyze positions');
      const rows = devices * seconds;
      const from = new Date(day).toISOString().replace('.000Z', 'Z');
      const to = new Date(day + seconds * 1000).toISOString().replace('.000Z', 'Z');
      const countSql = 'select count(*) from positions where organization_id = ? and building_id = ? and ts >= ? and ts < ?';
      const countParams = [organization, building.id, from, to];
      const countPlan = await storage.execute<{ 'QUERY PLAN': string }>(`explain ${countSql}`, countParams);
      const countMs = await medianMs(RUNS, () => storage.execute(countSql, countParams));
      const label = seconds === 86_400 && devices === 100 ? '8.64M positions' : `${(rows / 1e6).toFixed(2)}M positions (scaled down)`;
      const scan = countPlan.some((line) => /Index Only Scan/.test(line['QUERY PLAN'])) ? 'index-only scan' : 'seq scan';
      const figures: Figure[] = [
        { scenario: 'reports', metric: `seed ${label}`, value: seedSeconds, unit: 's' },
        { scenario: 'reports', metric: `count(*) baseline (${scan}, median of ${RUNS})`, value: countMs, unit: 'ms' },
      ];
      const window = `from_date=${from}&to_date=${to}`;
      const reports: [string, string][] = [
        ['geofencing_stay_time', `${window}&building_ids=${building.id}`],
        ['geofencing_sessions_matches', `${window}&building_ids=${building.id}`],
        ['visitors', `${window}&building_id=${building.id}&group=hour`],
        ['positioning_time', `${window}&building_id=${building.id}`],
        ['heatmap', `${window}&building_id=${building.id}&floor_id=${floors[0].id}`],
        ['raw_data', `${window}&building_ids=${building.id}`],
        ['user_positions', `${window}&building_id=${building.id}`],
      ];
      const timeReport = (name: string, query: string) =>
        medianMs(RUNS, async () => {
          const response = await admin.get(`/api/v1/reports/${name}.json?${query}`);
          if (response.status !== 200) throw new Error(`${name}: ${response.status} ${response.text.slice(0, 200)}`);
        });
      const rawMs = new Map<string, number>();
      for (const [name, query] of reports) {
        const elapsed = await timeReport(name, query);
        rawMs.set(name, elapsed);
        figures.push({ scenario: 'reports', metric: `${name} (${label})`, value: elapsed, unit: 'ms', target: `<= 3x count(*) = ${Math.round(countMs * 3)} ms`, met: elapsed <= countMs * 3 });
      }
      // One materializer pass over the day (what the first pass after an upgrade, or a backfill, does), then
      // the geofence reports again, served from the kept stays.
      const materializeStarted = performance.now();
      const units = await new ReportMaterializer(storage, materializations, createLogger('silent'), { lagMs: 0 }).runOnce();
      figures.push({ scenario: 'reports', metric: `materialize the day's stays (${units} device-hours)`, value: (performance.now() - materializeStarted) / 1000, unit: 's' });
      await storage.execute('vacuum analyze geofence_stays');
      for (const [name, query] of reports.filter(([report]) => report.startsWith('geofencing_'))) {
        const elapsed = await timeReport(name, query);
        const ratio = elapsed / countMs;
        figures.push({ scenario: 'reports', metric: `${name} from stays (${label}; raw path ${(rawMs.get(name)! / countMs).toFixed(2)}x count(*))`, value: elapsed, unit: 'ms', target: `<= 1x count(*) = ${Math.round(countMs)} ms (${ratio.toFixed(2)}x)`, met: ratio <= 1 });
      }
      return figures;
    } finally {
      await running.stop();
    }
  },
};
