import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import { FaultPostgres, faultServersAvailable, faultServersSkipReason, sleep } from '../../testkit/fault-servers.js';
import { spawnGateway, type SpawnedGateway } from '../../testkit/gateway-process.js';
import { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient } from '../../testkit/identity.js';

/**
 * `kill -9` of the gateway that tracked a device: nothing drains, its detector state dies with it. The gateway
 * started in its place rebuilds that state from storage and raises the dead-man alarm of the device that fell
 * silent meanwhile, once; killed and replaced again, the next one does not raise it a second time.
 */
if (!faultServersAvailable) console.warn(faultServersSkipReason);

const SILENCE_S = 2;

describe.skipIf(!faultServersAvailable)('dead-man coverage across a SIGKILLed gateway (private PostgreSQL)', () => {
  let postgres: FaultPostgres;
  let dataDir: string;
  let child: SpawnedGateway | undefined;

  /** A gateway process as `npm start` runs it, on the private PostgreSQL and the in-process bus. */
  const boot = async (): Promise<TestClient> => {
    child = await spawnGateway({ DATA_DIR: dataDir, LOG_LEVEL: 'warn', ADMIN_EMAIL, ADMIN_PASSWORD, DATABASE_URL: postgres.url });
    return adminClient(new TestClient(child.base));
  };
  const kill = () => child!.kill();
  const deadmanAlarms = () =>
    postgres.query<{ occurrences: number; reason: string; created_at: Date }>(
      "select occurrences, details->>'reason' as reason, created_at from alarms where type = 'DEADMAN' and device_id = 'faller'",
    );

  beforeAll(async () => {
    postgres = await FaultPostgres.start();
    dataDir = mkdtempSync(join(tmpdir(), 'floorcast-fault-rebuild-'));
  }, 90_000);

  afterAll(async () => {
    await child?.kill();
    await postgres?.destroy();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('the gateway started after a kill -9 raises the silent device’s dead-man alarm, once', async () => {
    let admin = await boot();
    const venue = await createVenue(admin, 'Kill venue');
    expect((await admin.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, { deadman_silence_s: SILENCE_S })).status).toBe(200);
    const pose = { device_id: 'faller', timestamp: Date.now(), building_id: venue.building.id, floor_id: venue.floors[0].id, x: 20, y: 20 };
    expect((await admin.post('/api/v1/realtime/positions', { poses: [pose] })).status).toBe(204);
    await kill(); // before the silence is due: the alarm is owed, and only this process knew
    const killedAt = Date.now();
    expect(await deadmanAlarms()).toEqual([]);

    admin = await boot();
    let alarms = await deadmanAlarms();
    for (const started = Date.now(); alarms.length === 0 && Date.now() - started < 20_000; alarms = await deadmanAlarms()) await sleep(100);
    expect(alarms.map((alarm) => [alarm.reason, alarm.occurrences])).toEqual([['silence', 1]]);
    expect(new Date(alarms[0]!.created_at).getTime()).toBeGreaterThanOrEqual(killedAt);

    await kill();
    admin = await boot();
    await sleep(2500); // a few sweeps of the third gateway
    expect((await deadmanAlarms()).map((alarm) => [alarm.reason, alarm.occurrences])).toEqual([['silence', 1]]);
    expect(
      (await postgres.query<{ n: number }>("select count(*)::int as n from alarm_raise_keys where key like 'deadman|faller|%'"))[0]!.n,
    ).toBe(1);
    child!.child.kill('SIGTERM');
  }, 120_000);
});
