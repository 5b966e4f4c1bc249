import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { PositionRecord } from '../shared/positions/position-record.js';
import { PositionStore } from '../shared/positions/position-store.js';
import { createVenue } from '../testkit/cartography.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, login } from '../testkit/identity.js';
import { startTestGateway } from '../testkit/test-gateway.js';
import type { Figure, Scenario } from './harness.js';
import { positionsIndexesForBench } from './positions-write.bench.js';

const DEVICES = 1000;
const FIXES_PER_DEVICE = 600;
const ROWS = DEVICES * FIXES_PER_DEVICE;
const DAY_MS = 86_400_000;
const MiB = 1024 * 1024;
/** A real day of 1,000 devices at one fix every 10 s is 8.64M rows, too slow to seed: one fix every 144 s. */
const SPACING_MS = DAY_MS / FIXES_PER_DEVICE;
const LABEL = '600k rows (1,000 devices x 600 fixes over one day, seeded directly)';

/**
 * CSV export of a day of a busy building: seeds the rows straight through PositionStore.insert (the upload
 * pipeline is measured elsewhere), then downloads the export over HTTP from the in-process gateway while
 * sampling the process RSS every 50 ms. Flat memory is the point: the peak growth should not depend on
 * the number of rows.
 */
export const csvExportScenario: Scenario = {
  name: 'csv-export',
  async run(): Promise<Figure[]> {
    const running = await startTestGateway({ LOG_LEVEL: 'silent' });
    try {
      const token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
      const admin = running.client.withToken(token);
      const { building, floors } = await createVenue(admin, 'Bench history venue');
      const organizationId: string = (await admin.get('/api/v1/organizations/current_organization')).body.id;
      const storage = running.gateway.services.storage;
      await positionsIndexesForBench(storage);
      const store = new PositionStore(storage);
      const day = Math.floor((Date.now() - 2 * DAY_MS) / DAY_MS) * DAY_MS;

      const seedStarted = performance.now();
      const stepsPerBatch = 20; // 20,000 rows per statement
      for (let step = 0; step < FIXES_PER_DEVICE; step += stepsPerBatch) {
        const batch: PositionRecord[] = [];
        for (let k = step; k < Math.min(step + stepsPerBatch, FIXES_PER_DEVICE); k++) {
          for (let d = 0; d < DEVICES; d++) {
            const timestamp = day + k * SPACING_MS + d * 100;
            batch.push({
              organizationId,
              deviceId: `device-${String(d).padStart(4, '0')}`,
              userId: null,
              buildingId: building.id,
              floorId: floors[d % 2].id,
              indoor: true,
              x: (d * 7 + k) % 120,
              y: (d * 13 + k) % 80,
              lat: 40.4168 + d * 1e-6,
              lng: -3.7038 - k * 1e-6,
              yaw: (k % 628) / 100,
              accuracy: 2,
              timestamp,
              receivedAt: timestamp,
            });
          }
        }
        await store.insert(batch);
      }
      const seedSeconds = (performance.now() - seedStarted) / 1000;
      // No ANALYZE: today's partition is usually exported before autovacuum has given it statistics.

      const date = encodeURIComponent(new Date(day).toISOString());
      // Start from a collected heap, so garbage left by the seeding neither inflates nor hides the growth.
      const collect = fullGc();
      collect();
      await new Promise((resolve) => setTimeout(resolve, 1000));
      collect();
      const before = process.memoryUsage();
      let peak = before.rss;
      let peakHeap = before.heapUsed;
      const sampler = setInterval(() => {
        const now = process.memoryUsage();
        peak = Math.max(peak, now.rss);
        peakHeap = Math.max(peakHeap, now.heapUsed);
      }, 50);
      let rows = -1; // the header line
      let bytes = 0;
      let firstByteMs = NaN;
      const started = performance.now();
      try {
        const response = await fetch(`${running.baseUrl}/api/v1/real_time/export/${building.id}?date=${date}`, {
          headers: { authorization: `Bearer ${token}` },
        });
        if (response.status !== 200 || !response.body) throw new Error(`export answered ${response.status}`);
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          if (Number.isNaN(firstByteMs)) firstByteMs = performance.now() - started;
          bytes += chunk.byteLength;
          for (let i = 0; i < chunk.length; i++) if (chunk[i] === 10) rows++;
        }
      } finally {
        clearInterval(sampler);
      }
      const seconds = (performance.now() - started) / 1000;
      peak = Math.max(peak, process.memoryUsage().rss);
      if (rows !== ROWS) throw new Error(`export had ${rows} rows, expected ${ROWS}`);

      const rate = rows / seconds;
      const growth = (peak - before.rss) / MiB;
      const heapGrowth = (peakHeap - before.heapUsed) / MiB;
      return [
        {
          scenario: 'csv-export',
          metric: `export rate, ${LABEL}`,
          value: rate,
          unit: 'rows/s',
          target: '>= 50,000 rows/s',
          met: rate >= 50_000,
        },
        {
          scenario: 'csv-export',
          metric: 'peak RSS growth during the export',
          value: growth,
          unit: 'MiB',
          target: '< 64 MiB (flat)',
          met: growth < 64,
        },
        {
          scenario: 'csv-export',
          metric: 'peak JS heap growth during the export',
          value: heapGrowth,
          unit: 'MiB',
          target: '< 64 MiB (flat)',
          met: heapGrowth < 64,
        },
        {
          scenario: 'csv-export',
          metric: 'time to first byte',
          value: firstByteMs,
          unit: 'ms',
          target: '< 1000 ms',
          met: firstByteMs < 1000,
        },
        { scenario: 'csv-export', metric: 'export size', value: bytes / MiB, unit: 'MiB' },
        {
          scenario: 'csv-export',
          metric: 'seed rate (PositionStore.insert, 20k rows per statement)',
          value: ROWS / seedSeconds,
          unit: 'rows/s',
        },
      ];
    } finally {
      await running.stop();
    }
  },
};

/** The engine's full collection, without starting node with --expose-gc (the bench runs under plain tsx). */
function fullGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
