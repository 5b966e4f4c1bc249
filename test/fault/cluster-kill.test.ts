import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import { FaultPostgres, FaultRedis, faultServersAvailable, faultServersSkipReason, freePort, sleep } from '../../testkit/fault-servers.js';
import { spawnGateway, type SpawnedGateway } from '../../testkit/gateway-process.js';
import { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient } from '../../testkit/identity.js';

/**
 * Two gateway processes on one (private) PostgreSQL and Redis, and a real `kill -9` of the one that owns a
 * building (issue 16): the survivor takes the building over, rebuilds its detector state from storage, and
 * raises the dead-man alarm of a device that fell silent there exactly once.
 */
if (!faultServersAvailable) console.warn(faultServersSkipReason);

/** One signing secret for both processes, so a token from either is good on the other. */
const JWT_SECRET = randomBytes(48).toString('base64');

describe.skipIf(!faultServersAvailable)('kill -9 of a building’s owner among two gateway processes (private servers)', () => {
  let postgres: FaultPostgres;
  let redis: FaultRedis;
  const dirs: string[] = [];
  const gateways: { process: SpawnedGateway; metrics: number }[] = [];

  const boot = async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'floorcast-cluster-kill-'));
    dirs.push(dataDir);
    const metrics = await freePort();
    const process = await spawnGateway({
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      ADMIN_EMAIL,
      ADMIN_PASSWORD,
      JWT_SECRET,
      DATABASE_URL: postgres.url,
      REDIS_URL: redis.url,
      REDIS_PREFIX: 'cluster-kill',
      METRICS_PORT: String(metrics),
    });
    gateways.push({ process, metrics });
  };

  /** The `floorcast_cluster_<name>` gauge of a gateway, read from its /metrics. */
  const gauge = async (index: number, name: string): Promise<number> => {
    const text = await (await fetch(`http://127.0.0.1:${gateways[index]!.metrics}/metrics`)).text();
    return Number(new RegExp(`^floorcast_cluster_${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  };
  /** Bounded, but generous: CI runs this beside other suites on 2 cores. A timeout says what each gateway saw. */
  const waitFor = async (what: string, check: () => Promise<boolean>, timeoutMs = 60_000) => {
    for (const started = Date.now(); !(await check()); await sleep(100)) {
      if (Date.now() - started > timeoutMs) {
        const seen = await Promise.all(
          gateways.map(async (_, index) =>
            Promise.all(['members', 'owned_buildings', 'ready_buildings'].map((name) => gauge(index, name).catch(() => NaN))),
          ),
        );
        throw new Error(`timed out waiting for ${what}; members, owned, ready per gateway: ${JSON.stringify(seen)}`);
      }
    }
  };
  const deadmanAlarms = () =>
    postgres.query<{ occurrences: number; reason: string }>(
      "select occurrences, details->>'reason' as reason from alarms where type = 'DEADMAN' and device_id = 'faller'",
    );

  beforeAll(async () => {
    [postgres, redis] = await Promise.all([FaultPostgres.start(), FaultRedis.start()]);
    await boot(); // migrates first, alone
    await boot();
  }, 120_000);

  afterAll(async () => {
    for (const gateway of gateways) await gateway.process.kill();
    await Promise.all([postgres?.stop(), redis?.stop()]);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('the survivor takes the building over and raises the silent device’s dead-man alarm once', async () => {
    await waitFor('both members seen by both', async () => (await gauge(0, 'members')) === 2 && (await gauge(1, 'members')) === 2);
    const admin = await adminClient(new TestClient(gateways[1]!.process.base));
    const { building, floors } = await createVenue(admin, 'Kill venue');
    expect((await admin.put(`/api/v1/buildings/${building.id}/alarm_settings`, { deadman_silence_s: 6 })).status).toBe(200);
    // Uploaded through one gateway, detected by the building's owner, whichever it is (its state lives there).
    const upload = await admin.post('/api/v1/realtime/positions', {
      poses: [{ device_id: 'faller', timestamp: Date.now(), building_id: building.id, floor_id: floors[0].id, x: 40, y: 40 }],
    });
    expect(upload.status, upload.text).toBe(204);
    // One building: exactly one gateway owns it and has it ready.
    await waitFor('one ready owner', async () => (await gauge(0, 'ready_buildings')) + (await gauge(1, 'ready_buildings')) === 1);
    const owner = (await gauge(0, 'ready_buildings')) === 1 ? 0 : 1;
    const survivor = 1 - owner;
    expect(await deadmanAlarms()).toEqual([]); // not due yet: the owner dies before it is
    await gateways[owner]!.process.kill(); // nothing released: heartbeat and lease expire

    await waitFor('the survivor to own the building', async () => (await gauge(survivor, 'ready_buildings')) === 1);
    await waitFor('the dead-man alarm', async () => (await deadmanAlarms()).length > 0);
    await sleep(3000); // a second raise would have happened by now
    expect(await deadmanAlarms()).toEqual([{ occurrences: 1, reason: 'silence' }]);
  }, 240_000);
});
