import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultPostgres, FaultRedis, faultServersAvailable, faultServersSkipReason, seeded, sleep } from '../../testkit/fault-servers.js';
import { spawnGateway, type SpawnedGateway } from '../../testkit/gateway-process.js';

/**
 * `kill -9` of a gateway process under upload load: nothing drains, nothing flushes, so only what was committed
 * before each 204 survives, and that must be every acknowledged pose.
 */
if (!faultServersAvailable) console.warn(faultServersSkipReason);

describe.skipIf(!faultServersAvailable)('gateway killed with SIGKILL under load (private servers)', () => {
  let postgres: FaultPostgres;
  let redis: FaultRedis;
  let dataDir: string;
  let child: SpawnedGateway | undefined;

  const boot = async (): Promise<string> => {
    child = await spawnGateway({
      DATA_DIR: dataDir,
      LOG_LEVEL: 'silent',
      ADMIN_EMAIL: 'admin@example.test',
      ADMIN_PASSWORD: 'admin-password-1',
      DATABASE_URL: postgres.url,
      REDIS_URL: redis.url,
      REDIS_PREFIX: 'fault-kill',
    });
    return child.base;
  };

  const token = async (base: string) => {
    const response = await fetch(`${base}/api/v1/auth/access_tokens`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from('admin@example.test:admin-password-1').toString('base64')}` },
    });
    return ((await response.json()) as { access_token: string }).access_token;
  };

  beforeAll(async () => {
    [postgres, redis] = await Promise.all([FaultPostgres.start(), FaultRedis.start()]);
    dataDir = mkdtempSync(join(tmpdir(), 'floorcast-fault-kill-'));
  }, 90_000);

  afterAll(async () => {
    await child?.kill();
    await Promise.all([postgres?.destroy(), redis?.destroy()]);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('every acknowledged pose is stored after a restart', async () => {
    let base = await boot();
    const headers = { authorization: `Bearer ${await token(base)}`, 'content-type': 'application/json' };
    const random = seeded(9);
    const acknowledged: { device_id: string; timestamp: number }[] = [];
    let sequence = 0;
    let killed = false;
    const uploader = async (worker: number) => {
      while (!killed) {
        const poses = Array.from({ length: 1 + Math.floor(random() * 20) }, () => ({
          device_id: `kill-${worker}-${Math.floor(random() * 4)}`,
          timestamp: Date.now() - 60_000 + sequence++,
          lat: 40 + random() / 100,
          lng: -3 + random() / 100,
        }));
        try {
          const response = await fetch(`${base}/api/v1/realtime/positions`, { method: 'POST', headers, body: JSON.stringify({ poses }) });
          await response.arrayBuffer();
          if (response.status === 204) acknowledged.push(...poses);
        } catch {
          // the connection died with the process: not acknowledged, nothing to check
        }
      }
    };
    const load = Promise.all([0, 1, 2, 3].map(uploader));
    while (acknowledged.length < 300) await sleep(20);
    const exited = child!.kill(); // mid-load: requests are in flight, some commits are under way
    killed = true;
    await exited;
    await load;

    base = await boot();
    // Storage and bus ready (no job worker runs here, so `jobs` is not).
    expect((await (await fetch(`${base}/readyz`)).json()).checks).toMatchObject({ storage: 'ok', bus: 'ok' });
    const rows = await postgres.query<{ device_id: string; ts: string }>(
      'select device_id, (extract(epoch from ts) * 1000)::bigint::text as ts from positions',
    );
    const stored = new Set(rows.map((row) => `${row.device_id}@${row.ts}`));
    const lost = acknowledged.filter((pose) => !stored.has(`${pose.device_id}@${pose.timestamp}`));
    expect(acknowledged.length).toBeGreaterThanOrEqual(300);
    expect(lost).toEqual([]);
    child!.child.kill('SIGTERM');
  });
});
