import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { PositionStore } from '../../shared/positions/position-store.js';
import {
  HOUR_MS,
  pauseAfter,
  ReportMaterializer,
  setWatermark,
  watermark,
  type DeviceHour,
  type Materialization,
} from '../../shared/reports/materializer.js';
import type { Storage } from '../../shared/storage/storage.js';
import { ADMIN_EMAIL } from '../../testkit/identity.js';
import { driverLabel, serverDatabaseUrl } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const HOUR = Date.UTC(2026, 2, 10, 10, 0, 0);
const DEVICES = ['pace-a', 'pace-b', 'pace-c', 'pace-d', 'pace-e'];

describe('pauseAfter', () => {
  it('keeps a pass busy `duty` of the time, and never pauses at 1', () => {
    expect(pauseAfter(100, 1)).toBe(0);
    expect(pauseAfter(100, 0.25)).toBe(300);
    expect(pauseAfter(100, 0.5)).toBe(100);
    expect(pauseAfter(0, 0.1)).toBe(0);
  });

  it('REPORTS_MATERIALIZE_DUTY is a share in (0, 1], 0.5 by default', () => {
    expect(loadConfig({}).REPORTS_MATERIALIZE_DUTY).toBe(0.5);
    expect(loadConfig({ REPORTS_MATERIALIZE_DUTY: '1' }).REPORTS_MATERIALIZE_DUTY).toBe(1);
    for (const bad of ['0', '1.5', '-0.2', 'half'])
      expect(() => loadConfig({ REPORTS_MATERIALIZE_DUTY: bad }), bad).toThrow(/REPORTS_MATERIALIZE_DUTY/);
  });
});

/**
 * The materializer's pacing (REPORTS_MATERIALIZE_DUTY): a pass pauses between batches of device-hours, inside its
 * transaction, for what keeps it busy `duty` of the time, still rebuilds every device-hour once and moves the
 * watermark; stop() cuts a pause short and the pass ends unpaced. A counting materialization and a fake clock
 * (each rebuild call "takes" 100 ms, pauses are recorded, not slept) keep it free of real timing.
 */
describe(`report materializer pacing (${driverLabel})`, () => {
  let running: RunningGateway;
  let storage: Storage;
  let rebuilt: string[][];
  let pauses: number[];
  let time: number;
  const counting: Materialization = {
    name: 'counting',
    async rebuild(_execute, units: readonly DeviceHour[]) {
      rebuilt.push(units.map((unit) => unit.deviceId));
      time += 100;
    },
    async deleteBefore() {},
  };
  const clock = (sleep: (ms: number) => Promise<void> = async () => {}) => ({
    now: () => time,
    sleep: (ms: number) => {
      pauses.push(ms);
      return sleep(ms);
    },
  });
  const materializer = (options: ConstructorParameters<typeof ReportMaterializer>[3]) =>
    new ReportMaterializer(storage, [counting], createLogger('silent'), { lagMs: 0, batch: 2, ...options });
  const passOverEverything = (m: ReportMaterializer) => m.runOnce(Date.now() + 1);

  beforeAll(async () => {
    running = await startTestGateway({ POSITIONS_MAX_AGE_SECONDS: String(100 * 365 * 86_400), REPORTS_MATERIALIZE_INTERVAL_MS: '0' });
    storage = running.gateway.services.storage;
    const [admin] = await storage.execute<{ organization_id: string }>('select organization_id::text from users where email = ?', [
      ADMIN_EMAIL,
    ]);
    await new PositionStore(storage).ensurePartitions([{ timestamp: HOUR } as PositionRecord]);
    // Five device-hours of a closed hour (three batches of two), pace-a's with four positions, the others' one.
    for (const [i, device] of [...DEVICES, 'pace-a', 'pace-a', 'pace-a'].entries()) {
      await storage.execute('insert into positions (organization_id, device_id, indoor, lat, lng, ts) values (?, ?, false, 40, -3, ?)', [
        admin!.organization_id,
        device,
        new Date(HOUR + i * 60_000).toISOString(),
      ]);
    }
  });
  afterAll(async () => running?.stop());
  beforeEach(async () => {
    rebuilt = [];
    pauses = [];
    time = 0;
    await setWatermark(storage, null);
  });
  const rebuiltDevices = () => rebuilt.flat().sort();
  const executeOf = (s: Storage) => (query: { text: string; params: unknown[] }) => s.execute<any>(query.text, query.params);

  it('pauses between batches for what keeps it busy `duty` of the time, rebuilding each device-hour once', async () => {
    expect(await passOverEverything(materializer({ duty: 0.25, clock: clock() }))).toBe(5);
    expect(rebuilt.map((batch) => batch.length)).toEqual([2, 2, 1]);
    expect(rebuiltDevices()).toEqual(DEVICES);
    expect(pauses).toEqual([300, 300]); // none after the last batch: it would only delay the commit
    expect(await watermark(executeOf(storage))).toBeGreaterThan(HOUR + HOUR_MS);
  });

  it('does not pause at duty 1 (the constructor default), nor in a backfill', async () => {
    expect(await passOverEverything(materializer({ clock: clock() }))).toBe(5);
    expect(pauses).toEqual([]);
    await materializer({ duty: 0.25, clock: clock() }).backfill(new Date(HOUR), new Date(HOUR + HOUR_MS));
    expect(rebuilt.map((batch) => batch.length)).toEqual([2, 2, 1, 2, 2, 1]);
    expect(pauses).toEqual([]);
  });

  it('bounds a batch by positions too: a bigger device-hour is a batch of its own', async () => {
    expect(await passOverEverything(materializer({ batch: 10, batchPositions: 2, duty: 0.5, clock: clock() }))).toBe(5);
    const positions = (device: string) => (device === 'pace-a' ? 4 : 1);
    for (const batch of rebuilt)
      expect(batch.length === 1 || batch.reduce((sum, device) => sum + positions(device), 0) <= 2, batch.join()).toBe(true);
    expect(rebuilt).toContainEqual(['pace-a']);
    expect(rebuilt.length).toBeGreaterThanOrEqual(3); // pace-a alone, four others at most two a batch
    expect(rebuiltDevices()).toEqual(DEVICES);
    expect(pauses).toEqual(rebuilt.slice(1).map(() => 100));
  });

  it('stop() cuts the pause short and the pass finishes unpaced, moving the watermark', async () => {
    let paused!: () => void;
    const pausing = new Promise<void>((resolve) => (paused = resolve));
    const m = materializer({ duty: 0.25, clock: clock(() => (paused(), new Promise<void>(() => {}))) });
    const pass = passOverEverything(m);
    await pausing;
    await m.stop();
    expect(await pass).toBe(5);
    expect(pauses).toEqual([300]);
    expect(rebuiltDevices()).toEqual(DEVICES);
    expect(await watermark(executeOf(storage))).toBeGreaterThan(HOUR + HOUR_MS);
  });

  // PGlite runs no autovacuum: unsummarised, the BRIN index on received_at matched every page at every pass.
  it.runIf(!serverDatabaseUrl)('on embedded storage a pass leaves no block range of positions unsummarised', async () => {
    const [admin] = await storage.execute<{ organization_id: string }>('select organization_id::text from users where email = ?', [
      ADMIN_EMAIL,
    ]);
    // Some hundred pages of one closed hour, received long ago (behind any watermark).
    await storage.execute(
      `insert into positions (organization_id, device_id, indoor, lat, lng, ts, received_at)
       select ?, 'pace-bulk', false, 40, -3, ?::timestamptz + g * interval '10 ms', '2000-01-01T00:00:00Z' from generate_series(1, 20000) g`,
      [admin!.organization_id, new Date(HOUR).toISOString()],
    );
    const unsummarised = async () =>
      Number(
        (
          await storage.execute<{ ranges: string }>(
            `select coalesce(sum(brin_summarize_new_values(i.inhrelid)), 0) as ranges from pg_inherits i
             where i.inhparent = 'positions_received_ts_idx'::regclass`,
          )
        )[0]!.ranges,
      );
    await setWatermark(storage, new Date());
    await passOverEverything(materializer({ clock: clock() }));
    expect(await unsummarised()).toBe(0);
  });
});
