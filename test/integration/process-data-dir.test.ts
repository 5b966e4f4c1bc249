import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LOCK_FILE } from '../../shared/storage/data-dir-lock.js';
import { spawnGateway, type SpawnedGateway } from '../../testkit/gateway-process.js';
import { TestClient } from '../../testkit/http-client.js';
import { adminClient } from '../../testkit/identity.js';

/**
 * One writer per DATA_DIR (embedded storage): `npm start`, `npm run demo` and the admin CLI lock it. Always on
 * embedded storage, whatever the pass (the lock is embedded storage's), each process spawned as an operator
 * would run it.
 */
const dataDir = mkdtempSync(join(tmpdir(), 'floorcast-lock-it-'));
const env = {
  DATA_DIR: dataDir,
  ADMIN_EMAIL: 'admin@example.test',
  ADMIN_PASSWORD: 'admin-password-1',
  LOG_LEVEL: 'warn',
  METRICS_PORT: '0',
  SHUTDOWN_GRACE_SECONDS: '2',
};

function run(entry: string, args: string[] = [], extra: Record<string, string> = {}): Promise<{ status: number | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', entry, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', HOST: '127.0.0.1', PORT: '0', ...env, ...extra },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) => child.once('exit', (status) => (clearTimeout(timer), resolve({ status, output }))));
}

describe('one writer per DATA_DIR (embedded storage)', () => {
  let first: SpawnedGateway | undefined;
  afterAll(async () => {
    await first?.kill();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a second gateway, the demo and the admin CLI on a DATA_DIR in use are refused, naming the pid; nothing is reported created', async () => {
    first = await spawnGateway(env);
    expect(readFileSync(join(dataDir, LOCK_FILE), 'utf8').trim()).toBe(String(first.pid));

    const second = await run('gateway/main.ts');
    expect(second.status).not.toBe(0);
    expect(second.output).toContain(`DATA_DIR is in use by pid ${first.pid}`);
    expect(second.output).not.toMatch(/listening on/);

    const demo = await run('demo/main.ts');
    expect(demo.status).not.toBe(0);
    expect(demo.output).toContain(`DATA_DIR is in use by pid ${first.pid}`);

    const cli = spawnSync(process.execPath, ['--import', 'tsx', 'gateway/cli/admin.ts', 'create-user', '--email', 'ops2@example.test'], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
      encoding: 'utf8',
    });
    expect(cli.status).not.toBe(0);
    expect(cli.stderr).toContain(`DATA_DIR is in use by pid ${first.pid}`);
    expect(cli.stderr).toContain('POST /api/v1/users'); // what to do instead
    expect(cli.stdout).not.toContain('created');

    // The first gateway still owns its data, and the user the CLI was refused does not exist.
    const admin = await adminClient(new TestClient(first.base));
    const users = await admin.get('/api/v1/users');
    expect(users.status).toBe(200);
    expect(users.body.data.map((user: { email: string }) => user.email)).not.toContain('ops2@example.test');

    // Released on a graceful stop: the CLI then works, and what it says it created is there after a restart.
    await first.stop();
    expect(first.child.exitCode).toBe(0);
    const created = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'gateway/cli/admin.ts', 'create-user', '--email', 'ops2@example.test', '--password', 'ops2-password'],
      {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
        encoding: 'utf8',
      },
    );
    expect(created.status, created.stderr).toBe(0);
    expect(created.stdout).toContain('created user');
    first = await spawnGateway(env);
    const again = await adminClient(new TestClient(first.base));
    expect((await again.get('/api/v1/users')).body.data.map((user: { email: string }) => user.email)).toContain('ops2@example.test');
  }, 180_000);

  it('a lock left by a dead process (kill -9) is taken over', async () => {
    await first?.kill(); // no release: the file stays with a dead pid
    expect(readFileSync(join(dataDir, LOCK_FILE), 'utf8').trim()).toBe(String(first!.pid));
    first = await spawnGateway(env);
    expect(readFileSync(join(dataDir, LOCK_FILE), 'utf8').trim()).toBe(String(first.pid));
    // And a lock file nobody could have written (empty) is no obstacle either.
    await first.kill();
    writeFileSync(join(dataDir, LOCK_FILE), '');
    first = await spawnGateway(env);
    expect((await fetch(`${first.base}/healthz`)).status).toBe(200);
  }, 120_000);
});
