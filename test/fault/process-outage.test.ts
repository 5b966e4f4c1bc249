import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import { FaultPostgres, FaultRedis, faultServersAvailable, faultServersSkipReason, sleep } from '../../testkit/fault-servers.js';
import { spawnGateway, type SpawnedGateway } from '../../testkit/gateway-process.js';
import { TestClient } from '../../testkit/http-client.js';
import { adminClient } from '../../testkit/identity.js';

/**
 * Processes against servers that go away, on private servers: a worker whose Redis restarted consumes again
 * without a restart; a worker's death makes reports 503 (and /readyz not ready) within seconds instead of a 504
 * after the job timeout; SIGTERM while Redis or PostgreSQL is away exits within SHUTDOWN_GRACE_SECONDS plus a
 * few seconds, the gateway's and the worker's alike.
 */
if (!faultServersAvailable) console.warn(faultServersSkipReason);

const GRACE_SECONDS = 2;
/** The promise: SHUTDOWN_GRACE_SECONDS + 5 s at most; a little more for the process to be reaped on a loaded host. */
const STOP_BOUND_MS = (GRACE_SECONDS + 5) * 1000 + 5000;

interface WorkerProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function startWorker(env: Record<string, string>): Promise<WorkerProcess> {
  let output = '';
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  process.once('exit', () => child.kill('SIGKILL'));
  child.stdout!.on('data', (chunk) => (output = (output + chunk).slice(-8000)));
  child.stderr!.on('data', (chunk) => (output = (output + chunk).slice(-8000)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const worker = { child, output: () => output, exited };
  return new Promise((resolve, reject) => {
    const timer = setInterval(() => {
      if (output.includes('worker ready')) clearInterval(timer), resolve(worker);
      else if (child.exitCode !== null) clearInterval(timer), reject(new Error(`worker did not start: ${output}`));
    }, 50);
  });
}

/** Whether `child` exits within `ms` of now; resolves with how long it took, or undefined. */
async function exitsWithin(child: ChildProcess, exited: Promise<unknown>, ms: number): Promise<number | undefined> {
  const started = Date.now();
  const outcome = await Promise.race([exited.then(() => 'exited'), sleep(ms).then(() => 'running')]);
  if (outcome === 'running') {
    child.kill('SIGKILL');
    return undefined;
  }
  return Date.now() - started;
}

describe.skipIf(!faultServersAvailable)('processes against servers that go away (private servers)', () => {
  let postgres: FaultPostgres;
  let redis: FaultRedis;
  let dataDir: string;
  let env: Record<string, string>;
  let gateway: SpawnedGateway | undefined;
  let worker: WorkerProcess | undefined;

  beforeAll(async () => {
    [postgres, redis] = await Promise.all([FaultPostgres.start(), FaultRedis.start()]);
    dataDir = mkdtempSync(join(tmpdir(), 'floorcast-process-outage-'));
    env = {
      DATABASE_URL: postgres.url,
      REDIS_URL: redis.url,
      DATA_DIR: dataDir,
      ADMIN_EMAIL: 'admin@example.test',
      ADMIN_PASSWORD: 'admin-password-1',
      LOG_LEVEL: 'info',
      JOBS_WORKER_TTL_MS: '1500',
      JOB_TIMEOUT_MS: '20000',
      SHUTDOWN_GRACE_SECONDS: String(GRACE_SECONDS),
      METRICS_PORT: '0',
      WORKER_METRICS_PORT: '0',
    };
  }, 90_000);

  afterAll(async () => {
    worker?.child.kill('SIGKILL');
    await gateway?.kill();
    await Promise.all([postgres?.destroy(), redis?.destroy()]);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a worker consumes again after its Redis restarted; once it is killed, reports answer 503 and /readyz says jobs are not ready', async () => {
    gateway = await spawnGateway(env);
    worker = await startWorker(env);
    const client = new TestClient(gateway.base);
    const admin = await adminClient(client);
    const venue = await createVenue(admin, 'Process outage venue');
    const report = () =>
      admin.get(
        `/api/v1/reports/visitors.json?building_id=${venue.building.id}&from_date=2026-01-01T00:00:00Z&to_date=2026-01-02T00:00:00Z`,
      );
    expect((await report()).status).toBe(200);

    await redis.stop();
    await sleep(1500);
    await redis.resume(); // empty: every key and the queue are gone, as after a crash without persistence
    let served = 0;
    for (let attempt = 0; attempt < 60 && served !== 200; attempt++) {
      const response = await report();
      served = response.status;
      if (served !== 200) {
        expect([503], response.text).toContain(served); // refused while no worker is back, never a hang or a 504
        await sleep(500);
      }
    }
    expect(served, worker.output()).toBe(200);

    worker.child.kill('SIGKILL');
    await worker.exited;
    const killed = Date.now();
    let jobsState = 'ok';
    while (jobsState === 'ok' && Date.now() - killed < 15_000) {
      jobsState = (await client.get('/readyz')).body.checks.jobs;
      if (jobsState === 'ok') await sleep(200);
    }
    expect(jobsState).toMatch(/no job worker/i); // within 15 s of its death (the poll's bound)
    const refused = await report();
    expect(refused.status, refused.text).toBe(503);
    expect(refused.body).toMatchObject({ status: 503, code: 'unavailable' });
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
  }, 240_000);

  it('SIGTERM while Redis is away: the gateway and a worker exit within SHUTDOWN_GRACE_SECONDS plus a few seconds', async () => {
    worker = await startWorker(env);
    await redis.stop();
    await sleep(500);
    gateway!.child.kill('SIGTERM');
    worker.child.kill('SIGTERM');
    const [gatewayMs, workerMs] = await Promise.all([
      exitsWithin(
        gateway!.child,
        new Promise((resolve) => (gateway!.child.exitCode !== null ? resolve(null) : gateway!.child.once('exit', resolve))),
        STOP_BOUND_MS,
      ),
      exitsWithin(worker.child, worker.exited, STOP_BOUND_MS),
    ]);
    expect(gatewayMs, gateway!.output()).toBeDefined();
    expect(workerMs, worker.output()).toBeDefined();
    await redis.resume();
  }, 120_000);

  it('SIGTERM while PostgreSQL is away exits within the bound too', async () => {
    gateway = await spawnGateway(env);
    postgres.stop('immediate');
    await sleep(500);
    gateway.child.kill('SIGTERM');
    const gone = new Promise((resolve) => (gateway!.child.exitCode !== null ? resolve(null) : gateway!.child.once('exit', resolve)));
    expect(await exitsWithin(gateway.child, gone, STOP_BOUND_MS), gateway.output()).toBeDefined();
    await postgres.resume();
  }, 120_000);
});
