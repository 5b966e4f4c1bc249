import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestClient } from '../../testkit/http-client.js';
import { basicAuth } from '../../testkit/http-client.js';
import { adminClient, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const SIGN_IN = '/api/v1/auth/access_tokens';

/**
 * Issue 28 item 4: nobody can lock someone else out of signing in. The gateway sits behind a trusted proxy
 * (the test client, 127.0.0.1), so X-Forwarded-For names the client, and the small budgets of the review's
 * reproduction apply: 3 per account and address, 12 per account (then slowed, never refused), 12 per address.
 */
describe(`sign-in throttle behind a trusted proxy (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  beforeAll(async () => {
    running = await startTestGateway({
      TRUSTED_PROXIES: '127.0.0.1,::1',
      LOGIN_THROTTLE_MAX_FAILURES: '3',
      LOGIN_THROTTLE_MAX_FAILURES_PER_ACCOUNT: '12',
      LOGIN_THROTTLE_MAX_FAILURES_PER_ADDRESS: '12',
      LOGIN_THROTTLE_MAX_DELAY_MS: '500',
    });
    admin = await adminClient(running.client);
  });
  afterAll(async () => running?.stop());

  const signIn = (email: string, password: string, from: string) =>
    running.client.post(SIGN_IN, undefined, { authorization: basicAuth(email, password), 'x-forwarded-for': from });

  it('12 wrong passwords from 4 addresses do not stop the right password from a fifth', async () => {
    const operator = await createUser(admin, 'user_manager');
    for (let i = 0; i < 12; i++) {
      expect((await signIn(operator.email, 'wrong-password', `198.51.100.${10 + (i % 4)}`)).status).toBe(401);
    }
    const right = await signIn(operator.email, operator.password, '198.51.100.99');
    expect(right.status, right.text).toBe(200);
    expect(right.body.access_token).toEqual(expect.any(String));
    // Even past the per-account budget, an attempt is slowed, not refused.
    for (let i = 0; i < 3; i++) expect((await signIn(operator.email, 'wrong-password', `198.51.100.${20 + i}`)).status).toBe(401);
    expect((await signIn(operator.email, operator.password, '198.51.100.98')).status).toBe(200);
  });

  it('counts the per-address budgets on the forwarded client address, not on the proxy’s', async () => {
    const victim = await createUser(admin, 'user');
    for (let i = 0; i < 3; i++) expect((await signIn(victim.email, 'wrong-password', '203.0.113.7')).status).toBe(401);
    const guesser = await signIn(victim.email, victim.password, '203.0.113.7');
    expect(guesser.status).toBe(429);
    expect(Number(guesser.headers.get('retry-after'))).toBeGreaterThan(0);
    // The same proxy forwarding another client: that client is not locked out.
    expect((await signIn(victim.email, victim.password, '203.0.113.8')).status).toBe(200);
    // A client cannot pick its address by prepending to the header: the proxy's last hop is what counts.
    expect((await signIn(victim.email, victim.password, '203.0.113.9, 203.0.113.7')).status).toBe(429);
  });

  it('counts an IPv6 client per /64', async () => {
    for (let i = 1; i <= 12; i++) await signIn(`nobody-${i}@example.test`, 'wrong-password', `2001:db8:5:6::${i.toString(16)}`);
    const user = await createUser(admin, 'user');
    expect((await signIn(user.email, user.password, '2001:db8:5:6:abcd::1')).status).toBe(429);
    expect((await signIn(user.email, user.password, '2001:db8:5:7::1')).status).toBe(200);
  });
});

describe(`sign-in throttle without a trusted proxy (${driverLabel})`, () => {
  let running: RunningGateway;
  beforeAll(async () => {
    running = await startTestGateway({ LOGIN_THROTTLE_MAX_FAILURES: '3' });
  });
  afterAll(async () => running?.stop());

  it('ignores X-Forwarded-For from a peer that is not trusted', async () => {
    const admin = await adminClient(running.client);
    const user = await createUser(admin, 'user');
    for (let i = 0; i < 3; i++) {
      await running.client.post(SIGN_IN, undefined, { authorization: basicAuth(user.email, 'wrong'), 'x-forwarded-for': `192.0.2.${i}` });
    }
    const refused = await running.client.post(SIGN_IN, undefined, {
      authorization: basicAuth(user.email, user.password),
      'x-forwarded-for': '192.0.2.200',
    });
    expect(refused.status).toBe(429);
  });
});
