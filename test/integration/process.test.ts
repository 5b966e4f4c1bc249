import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { BullmqJobQueue } from '../../shared/jobs/bullmq-job-queue.js';
import { redisServer } from '../../testkit/redis-cluster.js';
import { createTestEnvironment, driverLabel, serverRedisUrl, type TestEnvironment } from '../../testkit/test-environment.js';

/** Runs `gateway/main.ts` as `npm start` does, in a child process. */
function startProcess(env: Record<string, string>, entry = 'gateway/main.ts'): { child: ChildProcess; output: () => string } {
  let output = '';
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  return { child, output: () => output };
}

const exitOf = (child: ChildProcess) =>
  new Promise<number | null>((resolve) =>
    child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', (code) => resolve(code)),
  );

async function waitFor(predicate: () => boolean, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe(`the gateway process (${driverLabel})`, () => {
  let environment: TestEnvironment | undefined;
  let child: ChildProcess | undefined;
  afterEach(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await environment?.cleanup();
  });

  it('refuses to start on a bad setting and names the variable', async () => {
    const started = startProcess({ PORT: 'not-a-port', DATA_DIR: '/tmp/unused' });
    child = started.child;
    expect(await exitOf(child)).toBe(2);
    expect(started.output()).toContain('PORT');
  });

  it('starts, prints the generated admin password once, serves, and exits 0 on SIGTERM', async () => {
    environment = await createTestEnvironment();
    const env = { ...environment.env };
    delete env.ADMIN_PASSWORD;
    const started = startProcess(env);
    child = started.child;
    await waitFor(() => /listening on http:\/\/[\d.]+:(\d+)/.test(started.output()));
    const port = /listening on http:\/\/[\d.]+:(\d+)/.exec(started.output())![1];
    expect(started.output()).toMatch(/Generated password \(shown once\): \S{16,}/);
    const response = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(response.status).toBe(200);
    child.kill('SIGTERM');
    expect(await exitOf(child)).toBe(0);
  }, 240_000);

  it('loses nothing it acknowledged: killed with SIGKILL right after a 204, the rows are there after restart', async () => {
    environment = await createTestEnvironment();
    const boot = async () => {
      const started = startProcess(environment!.env);
      child = started.child;
      await waitFor(() => /listening on http:\/\/[\d.]+:(\d+)/.test(started.output()));
      return `http://127.0.0.1:${/listening on http:\/\/[\d.]+:(\d+)/.exec(started.output())![1]}`;
    };
    let base = await boot();
    const auth = { authorization: `Basic ${Buffer.from('admin@example.test:admin-password-1').toString('base64')}` };
    const token = (await (await fetch(`${base}/api/v1/auth/access_tokens`, { method: 'POST', headers: auth })).json()).access_token;
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const poses = Array.from({ length: 200 }, (_, i) => ({
      device_id: `durable-${i % 10}`,
      timestamp: Date.now() - i * 1000,
      lat: 40 + i / 1e4,
      lng: -3,
    }));
    const response = await fetch(`${base}/api/v1/realtime/positions`, { method: 'POST', headers, body: JSON.stringify({ poses }) });
    expect(response.status).toBe(204);
    child!.kill('SIGKILL'); // no drain, no flush: only what was committed before the 204 survives
    await exitOf(child!);

    base = await boot();
    const token2 = (await (await fetch(`${base}/api/v1/auth/access_tokens`, { method: 'POST', headers: auth })).json()).access_token;
    const history = await fetch(`${base}/api/v1/devices?identifiers=durable-0`, { headers: { authorization: `Bearer ${token2}` } });
    expect((await history.json()).data).toHaveLength(1);
    child!.kill('SIGTERM');
    expect(await exitOf(child!)).toBe(0);
    // Count the rows straight from storage, the gateway stopped.
    const { openStorage } = await import('../../shared/storage/index.js');
    const storage = await openStorage(environment.config);
    try {
      const [row] = await storage.execute<{ n: number }>("select count(*)::int as n from positions where device_id like 'durable-%'");
      expect(row!.n).toBe(200);
    } finally {
      await storage.close();
    }
  }, 240_000);

  it('the worker process refuses to start without REDIS_URL, naming it', async () => {
    const started = startProcess({ DATA_DIR: '/tmp/unused' }, 'workers/main.ts');
    child = started.child;
    expect(await exitOf(child)).toBe(2);
    expect(started.output()).toContain('REDIS_URL');
  });

  it('the worker process refuses to start on embedded storage (one writer per DATA_DIR), naming DATABASE_URL', async () => {
    const started = startProcess({ DATA_DIR: '/tmp/unused', REDIS_URL: 'redis://127.0.0.1:6379' }, 'workers/main.ts');
    child = started.child;
    expect(await exitOf(child)).toBe(2);
    expect(started.output()).toContain('DATABASE_URL: required by the worker process');
  });

  it.runIf(serverRedisUrl)(
    'the worker process consumes jobs from BullMQ and exits 0 on SIGTERM',
    async () => {
      environment = await createTestEnvironment({ LOG_LEVEL: 'info' });
      const started = startProcess(environment.env, 'workers/main.ts');
      child = started.child;
      await waitFor(() => started.output().includes('worker ready'));
      const queue = new BullmqJobQueue(redisServer(environment.config.REDIS_URL!), environment.config.REDIS_PREFIX);
      try {
        const result = await queue.run<{ storage: string; databaseTime: string }>(
          { name: 'storage-check', organizationId: 'org', data: {} },
          20_000,
        );
        expect(result.storage).toBe(environment.config.DATABASE_URL ? 'server' : 'embedded');
        expect(Number.isNaN(Date.parse(result.databaseTime))).toBe(false);
      } finally {
        await queue.close();
      }
      child.kill('SIGTERM');
      expect(await exitOf(child)).toBe(0);
    },
    240_000,
  );
});
