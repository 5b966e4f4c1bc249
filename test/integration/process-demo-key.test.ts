import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * `npm run demo` keeps no platform-administrator credential (review NL8): it seeds with a key of an
 * organization administrator, kept under DATA_DIR (0600) and replaced at each start with the previous one
 * revoked, and prints only a hint of the simulator's key. Always on embedded storage (the demo's).
 */
const dataDir = mkdtempSync(join(tmpdir(), 'floorcast-demo-key-'));
const env = {
  DATA_DIR: dataDir,
  HOST: '127.0.0.1',
  PORT: '0',
  METRICS_PORT: '0',
  LOG_LEVEL: 'warn',
  SHUTDOWN_GRACE_SECONDS: '2',
  ADMIN_EMAIL: 'admin@example.test',
};
const children: ChildProcess[] = [];

async function startDemo(): Promise<{ child: ChildProcess; output: () => string; base: string }> {
  let output = '';
  const child = spawn(process.execPath, ['--import', 'tsx', 'demo/main.ts'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  for (
    const deadline = Date.now() + 120_000;
    !/Console: +http:\/\/[\d.]+:\d+/.test(output);
    await new Promise((resolve) => setTimeout(resolve, 100))
  ) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`demo did not start: ${output}`);
  }
  return { child, output: () => output, base: /Console: +(http:\/\/[\d.]+:\d+)/.exec(output)![1]! };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

const users = (base: string, key: string) => fetch(`${base}/api/v1/users?size=1000`, { headers: { 'x-api-key': key } });

describe('the demo credentials', () => {
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('seeds with an organization administrator key kept 0600 and replaced at each start, and prints only hints', async () => {
    const first = await startDemo();
    const seederKey = readFileSync(join(dataDir, 'demo-seeder-key'), 'utf8').trim();
    const simulatorKey = readFileSync(join(dataDir, 'demo-simulator-key'), 'utf8').trim();
    for (const file of ['demo-seeder-key', 'demo-simulator-key']) expect(statSync(join(dataDir, file)).mode & 0o777).toBe(0o600);
    expect(first.output()).not.toContain(seederKey);
    expect(first.output()).not.toContain(simulatorKey);
    expect(first.output()).toContain(`${simulatorKey.slice(0, 7)}…`);

    // The key belongs to an administrator of the demo's organization, not to the platform administrator.
    const listed = await users(first.base, seederKey);
    expect(listed.status).toBe(200);
    const seeder = (await listed.json()).data.find((user: { email: string }) => user.email === 'seeder@demo.floorcast.local');
    expect(seeder).toMatchObject({ role: 'admin', platform_admin: false });
    await stop(first.child);

    // A later start (the generated password long gone) signs in with the kept key, and replaces it.
    const second = await startDemo();
    const rotated = readFileSync(join(dataDir, 'demo-seeder-key'), 'utf8').trim();
    expect(rotated).not.toBe(seederKey);
    expect(second.output()).toMatch(/building \d+ reused/);
    expect((await users(second.base, seederKey)).status).toBe(401);
    expect((await users(second.base, simulatorKey)).status).toBe(401);
    expect((await users(second.base, rotated)).status).toBe(200);
    await stop(second.child);
  }, 300_000);
});
