import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import { freePort } from '../../testkit/fault-servers.js';
import { TestClient } from '../../testkit/http-client.js';
import { adminClient } from '../../testkit/identity.js';
import {
  createTestEnvironment,
  driverLabel,
  serverDatabaseUrl,
  serverRedisUrl,
  type TestEnvironment,
} from '../../testkit/test-environment.js';

/**
 * Processes of Floorcast on one host do not trip over each other: a gateway and a worker with default metrics
 * settings both start (and a report is served through them), and a second gateway on a bound API port is
 * refused instead of silently sharing it.
 */
interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

const children: ChildProcess[] = [];
function start(entry: string, env: Record<string, string>): Started {
  let output = '';
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function waitFor(started: Started, pattern: RegExp, timeoutMs = 60_000): Promise<RegExpExecArray> {
  for (const deadline = Date.now() + timeoutMs; ; await new Promise((resolve) => setTimeout(resolve, 50))) {
    const match = pattern.exec(started.output());
    if (match) return match;
    if (started.child.exitCode !== null || Date.now() > deadline) throw new Error(`no ${pattern} in: ${started.output()}`);
  }
}

const portInUse = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });

/** The environment as an operator sets it: the metrics ports left at their defaults. */
function withDefaultMetrics(env: Record<string, string>): Record<string, string> {
  const { METRICS_PORT: _gateway, WORKER_METRICS_PORT: _worker, ...rest } = env;
  return { ...rest, LOG_LEVEL: 'info' };
}

describe(`processes on one host (${driverLabel})`, () => {
  let environment: TestEnvironment | undefined;
  afterEach(async () => {
    for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await environment?.cleanup();
    environment = undefined;
  });

  it.runIf(serverDatabaseUrl && serverRedisUrl)(
    'a gateway and a worker with default metrics settings both start, and a report is served',
    async (context) => {
      if ((await portInUse(9464)) || (await portInUse(9465))) {
        console.warn('ports 9464/9465 are taken on this host by something else: the default-settings test cannot run here');
        context.skip();
      }
      environment = await createTestEnvironment();
      const env = withDefaultMetrics(environment.env);
      const gateway = start('gateway/main.ts', env);
      const port = (await waitFor(gateway, /listening on http:\/\/[\d.]+:(\d+)/))[1];
      const worker = start('workers/main.ts', env);
      await waitFor(worker, /worker ready/);
      // Each serves its metrics on its own default port.
      expect((await fetch('http://127.0.0.1:9464/metrics')).status).toBe(200);
      expect((await fetch('http://127.0.0.1:9465/metrics')).status).toBe(200);

      const admin = await adminClient(new TestClient(`http://127.0.0.1:${port}`));
      const venue = await createVenue(admin, 'One host venue');
      const report = await admin.get(
        `/api/v1/reports/visitors.json?building_id=${venue.building.id}&from_date=2026-01-01T00:00:00Z&to_date=2026-01-02T00:00:00Z`,
      );
      expect(report.status, report.text).toBe(200);
      expect(report.body.meta.map((column: { name: string }) => column.name).length).toBeGreaterThan(0);
      expect((await admin.get('/readyz')).body).toEqual({ status: 'ok', checks: { storage: 'ok', bus: 'ok', jobs: 'ok' } });

      // A second worker on the same defaults: its busy metrics port is a start error naming the variable.
      const second = start('workers/main.ts', env);
      expect(await second.exited).not.toBe(0);
      expect(second.output()).toContain('WORKER_METRICS_PORT: 127.0.0.1:9465 is in use (another Floorcast may be running on this host)');
      expect(second.output()).not.toMatch(/^\s+at /m); // a message, not a stack trace

      gateway.child.kill('SIGTERM');
      worker.child.kill('SIGTERM');
      expect(await gateway.exited).toBe(0);
      expect(await worker.exited).toBe(0);
    },
    180_000,
  );

  it('a second gateway on a bound API port is refused unless REUSE_PORT=true', async () => {
    environment = await createTestEnvironment();
    const port = String(await freePort());
    const first = start('gateway/main.ts', { ...environment.env, PORT: port });
    await waitFor(first, /listening on http:\/\/[\d.]+:(\d+)/);
    // Its own DATA_DIR and database: only the port is shared.
    const other = await createTestEnvironment();
    try {
      const second = start('gateway/main.ts', { ...other.env, PORT: port });
      expect(await second.exited).not.toBe(0);
      expect(second.output()).toContain(`PORT ${port} is in use: another Floorcast?`);
      expect(second.output()).not.toMatch(/listening on/);
      expect(second.output()).not.toMatch(/^\s+at /m);
      // Asking for reuse does not take a port held exclusively either: sharing is for gateways that all ask for it.
      const reusing = start('gateway/main.ts', { ...other.env, PORT: port, REUSE_PORT: 'true' });
      expect(await reusing.exited).not.toBe(0);
      expect(reusing.output()).toContain(`PORT ${port} is in use`);
    } finally {
      await other.cleanup();
    }
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
  }, 180_000);

  it('gateways that all set REUSE_PORT=true share the port', async () => {
    environment = await createTestEnvironment({ REUSE_PORT: 'true' });
    const port = String(await freePort());
    const first = start('gateway/main.ts', { ...environment.env, PORT: port });
    await waitFor(first, /listening on/);
    const other = await createTestEnvironment({ REUSE_PORT: 'true' });
    try {
      const second = start('gateway/main.ts', { ...other.env, PORT: port });
      await waitFor(second, new RegExp(`listening on http://[\\d.]+:${port}`));
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
    } finally {
      await other.cleanup();
    }
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
  }, 180_000);
});
