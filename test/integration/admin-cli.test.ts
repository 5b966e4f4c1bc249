import { execFile, spawnSync } from 'node:child_process';
import { TokenService, loadJwtSecret } from '../../gateway/auth/token-service.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnGateway } from '../../testkit/gateway-process.js';
import { TestClient, basicAuth } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, login } from '../../testkit/identity.js';
import { createTestEnvironment, driverLabel, type TestEnvironment } from '../../testkit/test-environment.js';
import { startTestGateway } from '../../testkit/test-gateway.js';

/** `npm run admin -- ...`, as an operator would run it (the gateway stopped, same environment). */
function admin(environment: TestEnvironment, ...args: string[]) {
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'gateway/cli/admin.ts', ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...environment.env },
    encoding: 'utf8',
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/**
 * The same, without blocking this process: while a gateway runs, a blocked event loop would miss that the
 * gateway closed an idle pooled connection, and the next request would go out on it.
 */
function adminWhileRunning(
  environment: TestEnvironment,
  ...args: string[]
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...environment.env };
    execFile(process.execPath, ['--import', 'tsx', 'gateway/cli/admin.ts', ...args], { env, encoding: 'utf8' }, (error, stdout, stderr) =>
      resolve({ status: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

describe(`admin CLI (${driverLabel})`, () => {
  let environment: TestEnvironment;
  beforeAll(async () => {
    environment = await createTestEnvironment();
    // Boot once so the first organization exists, then stop (embedded storage is single-process).
    const running = await startTestGateway({}, {}, environment);
    await running.gateway.close();
  });
  afterAll(async () => environment?.cleanup());

  it('creates a user and an API key that then work against the gateway', async () => {
    const created = admin(environment, 'create-user', '--email', 'ops@example.test', '--role', 'user_manager');
    expect(created.status, created.stderr).toBe(0);
    const password = /password: (\S+)/.exec(created.stdout)![1]!;
    const key = admin(environment, 'create-apikey', '--email', 'ops@example.test', '--permission', 'read-write');
    expect(key.status, key.stderr).toBe(0);
    const apikey = /apikey: (fc_\S+)/.exec(key.stdout)![1]!;

    const running = await startTestGateway({}, {}, environment);
    try {
      const byPassword = await running.client.post('/api/v1/auth/access_tokens', undefined, {
        authorization: basicAuth('ops@example.test', password),
      });
      expect(byPassword.status).toBe(200);
      const byKey = await running.client.get('/api/v1/users', { 'x-api-key': apikey });
      expect(byKey.status).toBe(200);
      expect(byKey.body.data.map((user: { email: string }) => user.email)).toContain('ops@example.test');
    } finally {
      await running.gateway.close();
    }
  });

  it('refuses bad arguments with exit 2 and the usage', () => {
    const result = admin(environment, 'create-user', '--email', 'x@example.test', '--role', 'emperor');
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('--role must be one of');
    expect(admin(environment, 'no-such-command').status).toBe(2);
  });

  it('backfill-reports rebuilds the kept report data of a window, and refuses a bad one', () => {
    const done = admin(environment, 'backfill-reports', '--from', '2026-03-01T00:00:00Z', '--to', '2026-03-03T00:00:00Z');
    expect(done.status, done.stderr).toBe(0);
    expect(done.stdout).toContain('rebuilt 0 device-hours of 2026-03-01T00:00:00.000Z .. 2026-03-03T00:00:00.000Z');
    const backwards = admin(environment, 'backfill-reports', '--from', '2026-03-03T00:00:00Z', '--to', '2026-03-01T00:00:00Z');
    expect(backwards.status).toBe(2);
    expect(backwards.stderr).toContain('--to after --from');
  });

  it('while a gateway process runs: refused on embedded storage, stored and seen by the gateway on a server; never "created" unless stored', async () => {
    const gateway = await spawnGateway(environment.env);
    try {
      const result = admin(environment, 'create-user', '--email', 'busy@example.test', '--password', 'busy-password-1');
      const admin2 = await adminClient(new TestClient(gateway.base));
      const emails = (await admin2.get('/api/v1/users')).body.data.map((user: { email: string }) => user.email);
      if (environment.config.DATABASE_URL) {
        expect(result.status, result.stderr).toBe(0);
        expect(result.stdout).toContain('created user');
        expect(emails).toContain('busy@example.test');
      } else {
        expect(result.status).not.toBe(0);
        expect(result.stderr).toContain(`DATA_DIR is in use by pid ${gateway.pid}`);
        expect(result.stdout).not.toContain('created');
        expect(emails).not.toContain('busy@example.test');
      }
    } finally {
      await gateway.stop();
    }
  }, 180_000);
  it('reset-password works while a gateway process runs (through its API on embedded storage) and with it stopped', async () => {
    const gateway = await spawnGateway(environment.env);
    const client = new TestClient(gateway.base);
    const signIn = (password: string) =>
      client.post('/api/v1/auth/access_tokens', undefined, { authorization: basicAuth(ADMIN_EMAIL, password) });
    const until401 = async (token: string) => {
      // A server database is written directly: gateways drop their cached credential within its 5 s expiry.
      for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 250))) {
        if ((await client.get('/api/v1/users', { authorization: `Bearer ${token}` })).status === 401) return 401;
      }
      return (await client.get('/api/v1/users', { authorization: `Bearer ${token}` })).status;
    };
    try {
      const before = (await login(client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
      const reset = await adminWhileRunning(environment, 'reset-password', '--email', ADMIN_EMAIL, '--url', gateway.base);
      expect(reset.status, reset.stderr).toBe(0);
      if (!environment.config.DATABASE_URL) expect(reset.stdout).toContain(`through the gateway at ${gateway.base} (pid ${gateway.pid})`);
      const generated = /password: (\S+)/.exec(reset.stdout)![1]!;
      expect((await signIn(generated)).status).toBe(200);
      expect((await signIn(ADMIN_PASSWORD)).status).toBe(401);
      expect(await until401(before)).toBe(401); // signed out everywhere

      // Operator tokens are short-lived: one minted for longer than 5 minutes is refused, a 2-minute one taken.
      const operator = (ttl: number) =>
        new TokenService(loadJwtSecret(environment.config), ttl).sign({
          sub: 'operator',
          email: ADMIN_EMAIL,
          organization_uuid: '',
          role: 'admin',
          api_permission: 'read-write',
          operator: true,
        });
      expect((await client.get('/api/v1/users', { authorization: `Bearer ${await operator(600)}` })).status).toBe(401);
      expect((await client.get('/api/v1/users', { authorization: `Bearer ${await operator(120)}` })).status).toBe(200);

      const back = await adminWhileRunning(
        environment,
        'reset-password',
        '--email',
        ADMIN_EMAIL,
        '--password',
        ADMIN_PASSWORD,
        '--url',
        gateway.base,
      );
      expect(back.status, back.stderr).toBe(0);
      expect(back.stdout).not.toContain('password:');
      expect((await signIn(ADMIN_PASSWORD)).status).toBe(200);
      expect((await adminWhileRunning(environment, 'reset-password', '--email', 'nobody@example.test', '--url', gateway.base)).status).toBe(
        2,
      );
    } finally {
      await gateway.stop();
    }

    // With the gateway stopped the CLI writes storage itself; the next gateway takes the new password.
    const offline = await adminWhileRunning(environment, 'reset-password', '--email', ADMIN_EMAIL, '--password', 'offline-password-3');
    expect(offline.status, offline.stderr).toBe(0);
    expect(offline.stdout).toContain(`reset the password of ${ADMIN_EMAIL}`);
    const again = await spawnGateway(environment.env);
    try {
      const client2 = new TestClient(again.base);
      expect(
        (await client2.post('/api/v1/auth/access_tokens', undefined, { authorization: basicAuth(ADMIN_EMAIL, 'offline-password-3') }))
          .status,
      ).toBe(200);
      const restored = await adminWhileRunning(
        environment,
        'reset-password',
        '--email',
        ADMIN_EMAIL,
        '--password',
        ADMIN_PASSWORD,
        '--url',
        again.base,
      );
      expect(restored.status, restored.stderr).toBe(0);
    } finally {
      await again.stop();
    }
  }, 240_000);
});
