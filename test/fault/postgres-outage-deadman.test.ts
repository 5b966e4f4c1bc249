import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import { FaultPostgres, faultServersAvailable, faultServersSkipReason, sleep } from '../../testkit/fault-servers.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient } from '../../testkit/identity.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const SILENCE_S = 4;

/**
 * PostgreSQL down for longer than the silence window: every upload was refused meanwhile, so the silence was ours.
 * Once it is back, a device that reports within a window raises nothing; one that stays silent raises its
 * DEADMAN a window after the database came back.
 */
if (!faultServersAvailable) console.warn(faultServersSkipReason);

describe.skipIf(!faultServersAvailable)('no dead-man alarm from a PostgreSQL outage (private server)', () => {
  let postgres: FaultPostgres;
  let running: RunningGateway;
  let admin: TestClient;

  beforeAll(async () => {
    postgres = await FaultPostgres.start();
    running = await startTestGateway({
      DATABASE_URL: postgres.url,
      REDIS_URL: '',
      DATABASE_STATEMENT_TIMEOUT_MS: '3000',
      DATABASE_ACQUIRE_TIMEOUT_MS: '1000',
    });
    admin = await adminClient(running.client);
  }, 90_000);

  afterAll(async () => {
    await running?.stop().catch(() => undefined);
    await postgres?.destroy();
  });

  it('devices back within a window of the recovery raise nothing; the one still silent raises its DEADMAN a window after it', async () => {
    const venue = await createVenue(admin, 'Outage venue');
    expect((await admin.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, { deadman_silence_s: SILENCE_S })).status).toBe(200);
    const at = (deviceId: string, x: number) => ({
      device_id: deviceId,
      timestamp: Date.now(),
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x,
      y: 20,
    });
    expect((await admin.post('/api/v1/realtime/positions', { poses: [at('back', 10), at('stays-silent', 30)] })).status).toBe(204);
    await sleep(300);
    postgres.stop('fast');
    await sleep(SILENCE_S * 1000 + 2000);
    await postgres.resume();
    let ready = false;
    for (let attempt = 0; attempt < 200 && !ready; attempt++) {
      await sleep(100);
      ready = (await running.client.get('/readyz')).status === 200;
    }
    expect(ready).toBe(true);
    const backAt = Date.now();
    let reporting = true;
    const reporter = (async () => {
      for (let x = 11; reporting; x++) {
        await admin.post('/api/v1/realtime/positions', { poses: [at('back', x)] });
        await sleep(500);
      }
    })();
    const deadmen = () =>
      postgres.query<{ device_id: string; created_at: Date }>(
        "select device_id, created_at from alarms where type = 'DEADMAN' order by device_id",
      );
    let rows = await deadmen();
    try {
      for (const started = Date.now(); rows.length === 0 && Date.now() - started < 20_000; rows = await deadmen()) await sleep(200);
      await sleep(1500);
      rows = await deadmen();
    } finally {
      reporting = false;
      await reporter;
    }
    expect(rows.map((row) => row.device_id)).toEqual(['stays-silent']);
    expect(new Date(rows[0]!.created_at).getTime()).toBeGreaterThanOrEqual(backAt + SILENCE_S * 1000 - 1500);
  }, 120_000);
});
