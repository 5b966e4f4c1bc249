import { PositionStore } from '../shared/positions/position-store.js';
import { setWatermark, type DeviceHour } from '../shared/reports/materializer.js';
import { reportParamSchemas } from '../shared/reports/report-params.js';
import { reportQueries } from '../shared/reports/report-queries.js';
import { inBoundedTransaction, UNBOUNDED } from '../shared/reports/report-sql.js';
import { rollupMaterialization } from '../shared/reports/rollups.js';
import { createVenue } from '../test/support/cartography.js';
import { adminClient } from '../test/support/identity.js';
import { startTestGateway } from '../test/support/test-gateway.js';
import { medianMs, type Figure, type Scenario } from './harness.js';

const RUNS = Number(process.env.BENCH_REPORT_RUNS ?? 3);
const DAY_MS = 86_400_000;


/**
 * Visitors, positioning_time and heatmap served from the rollups (issue 18) against the same reports from
 * positions only and a count(*) of the day: the day of reports.bench.ts (100 devices every second, scaled
 * down on embedded storage: BENCH_REPORT_SECONDS), its rollups rebuilt per device-hour (the cost bounds what
 * the materializer adds to ingest), then each report both ways, median of BENCH_REPORT_RUNS. A month: the
 * seeded span's rollups repeated over 30 days (the report reads rollups only for the copies).
 */
export const rollupsScenario: Scenario = {
  name: 'rollups',
  async run(): Promise<Figure[]> {
    const devices = Number(process.env.BENCH_REPORT_DEVICES ?? 100);
    const seconds = Number(process.env.BENCH_REPORT_SECONDS ?? (process.env.DATABASE_URL ? 86_400 : 3_600));
    const running = await startTestGateway({ LOG_LEVEL: 'silent', JOB_TIMEOUT_MS: '1800000', REPORTS_MATERIALIZE_INTERVAL_MS: '0' });
    const { storage } = running.gateway.services;
    try {
      const admin = await adminClient(running.client);
      const { building, floors } = await createVenue(admin, 'Rollup bench');
      const organization = (await admin.get('/api/v1/organizations/current_organization')).body.id as string;
      const day = Date.UTC(2026, 0, 15);
      await new PositionStore(storage).ensurePartitions([{ timestamp: day } as never, { timestamp: day + seconds * 1000 - 1 } as never]);
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
      await storage.execute('vacuum analyze positions');
      const label = seconds === 86_400 && devices === 100 ? '8.64M positions' : `${((devices * seconds) / 1e6).toFixed(2)}M positions (scaled down)`;
      const figures: Figure[] = [];
      const figure = (metric: string, value: number, unit: string, extra: Partial<Figure> = {}) => figures.push({ scenario: 'rollups', metric, value, unit, ...extra });

      // Rebuild: one transaction per UTC hour of every device, as a materializer pass would take them.
      const hours = Math.ceil(seconds / 3600);
      const rebuildStarted = performance.now();
      for (let h = 0; h < hours; h++) {
        const units: DeviceHour[] = Array.from({ length: devices }, (_, d) => ({ organizationId: organization, deviceId: `bench-${d}`, hour: new Date(day + h * 3_600_000) }));
        await inBoundedTransaction(storage, UNBOUNDED, (execute) => rollupMaterialization.rebuild(execute, units));
      }
      const rebuildMs = performance.now() - rebuildStarted;
      await setWatermark(storage, new Date());
      await storage.execute('vacuum analyze rollup_runs');
      await storage.execute('vacuum analyze rollup_heat_cells');
      const [sizes] = await storage.execute<{ runs: number; cells: number }>('select (select count(*) from rollup_runs)::int as runs, (select count(*) from rollup_heat_cells)::int as cells');
      figure(`rebuild ${devices * hours} device-hours (${label})`, rebuildMs / 1000, 's');
      figure('rebuild per device-hour (3,600 positions when full)', rebuildMs / (devices * hours), 'ms');
      figure('rollup_runs rows / rollup_heat_cells rows', sizes!.runs, `runs, ${sizes!.cells} cells`);

      const from = new Date(day).toISOString();
      const to = new Date(day + seconds * 1000).toISOString();
      const countSql = 'select count(*) from positions where organization_id = ? and building_id = ? and ts >= ? and ts < ?';
      const countMs = await medianMs(RUNS, () => storage.execute(countSql, [organization, building.id, from, to]));
      figure(`count(*) baseline (median of ${RUNS})`, countMs, 'ms');
      const scope = { organizationId: organization };
      const reports = [
        ['visitors', { building_id: building.id, group: 'hour' }],
        ['positioning_time', { building_id: building.id }],
        ['heatmap', { building_id: building.id, floor_id: floors[0].id }],
      ] as const;
      for (const [name, extra] of reports) {
        const params = reportParamSchemas[name].parse({ from_date: from, to_date: to, ...extra }) as Record<string, unknown>;
        const rawMs = await medianMs(RUNS, () => reportQueries[name](storage, params, scope, UNBOUNDED, { raw: true }));
        const servedMs = await medianMs(RUNS, () => reportQueries[name](storage, params, scope));
        figure(`${name} from positions (${label})`, rawMs / countMs, 'x count(*)', { target: '<= 3x', met: rawMs <= 3 * countMs });
        figure(`${name} from rollups (${label})`, servedMs / countMs, 'x count(*)', { target: '<= 3x', met: servedMs <= 3 * countMs });
        figure(`${name} from rollups (${label}), time`, servedMs, 'ms');
      }

      // A month: the seeded span's rollups repeated over the 30 days that end with it (a day is 29 copies; a
      // scaled-down seed, more), so the month figure reads a month of 100 devices whatever was seeded.
      const spanUs = seconds * 1_000_000;
      const copies = Math.ceil((30 * DAY_MS) / (seconds * 1000)) - 1;
      await storage.execute(
        `insert into rollup_runs select r.organization_id, r.device_id, r.quarter - k * ${seconds} * interval '1 second', r.building_id, r.floor_id, r.user_id, r.first_us - k * ${spanUs}::int8, r.last_us - k * ${spanUs}::int8, r.positions
         from rollup_runs r, generate_series(1, ${copies}) as k`,
      );
      await storage.execute(
        `insert into rollup_heat_cells select r.organization_id, r.device_id, r.hour - k * ${seconds} * interval '1 second', r.building_id, r.floor_id, r.indoor, r.user_id, r.lat_cell, r.lng_cell, r.positions
         from rollup_heat_cells r, generate_series(1, ${copies}) as k`,
      );
      await storage.execute('vacuum analyze rollup_runs');
      await storage.execute('vacuum analyze rollup_heat_cells');
      const monthFrom = new Date(day + seconds * 1000 - 30 * DAY_MS).toISOString();
      for (const [name, extra] of reports) {
        const params = reportParamSchemas[name].parse({ from_date: monthFrom, to_date: to, ...extra, ...(name === 'visitors' ? { group: 'day' } : {}) }) as Record<string, unknown>;
        const servedMs = await medianMs(RUNS, () => reportQueries[name](storage, params, scope));
        figure(`${name} over 30 days of ${devices} devices from rollups`, servedMs, 'ms', { target: '< 2000 ms', met: servedMs < 2000 });
      }
      return figures;
    } finally {
      await setWatermark(storage, null);
      await running.stop();
    }
  },
};
