import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { destinationProblem, isForbiddenAddress } from '../../../shared/webhooks/address-guard.js';
import { retryDelayMs } from '../../../shared/webhooks/deliveries.js';
import { generateSecret, secretKey, sign } from '../../../shared/webhooks/signature.js';
import { send } from '../../../shared/webhooks/webhook-sender.js';

describe('webhook signatures (Standard Webhooks)', () => {
  it('matches the specification’s example', () => {
    // From the Standard Webhooks reference libraries' tests.
    const signature = sign('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
    expect(signature).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('generates whsec_ secrets of 32 random bytes', () => {
    const secret = generateSecret();
    expect(secret).toMatch(/^whsec_/);
    expect(secretKey(secret)).toHaveLength(32);
    expect(generateSecret()).not.toBe(secret);
  });
});

describe('outbound address guard', () => {
  it.each([
    '127.0.0.1',
    '127.255.0.9',
    '10.0.0.1',
    '172.16.5.4',
    '172.31.255.255',
    '192.168.0.1',
    '169.254.169.254',
    '100.64.0.1',
    '100.127.255.255',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:8.8.8.8',
    'not-an-address',
    // IPv4 embedded in IPv6 (compatible, local NAT64, 6to4, Teredo), site-local, documentation, and anything outside 2000::/3.
    '::127.0.0.1',
    '::8.8.8.8',
    '64:ff9b:1::7f00:1',
    '2002:7f00:1::1',
    '2002:808:808::1',
    '2001::1',
    '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    'fec0::1',
    '2001:db8::1',
    '100::1',
    '4000::1',
  ])('refuses %s', (address) => expect(isForbiddenAddress(address)).toBe(true));

  it.each(['8.8.8.8', '93.184.215.14', '172.32.0.1', '100.128.0.1', '11.0.0.1', '2606:4700:4700::1111', '2001:db9::1'])(
    'lets %s through',
    (address) => {
      expect(isForbiddenAddress(address)).toBe(false);
    },
  );

  it('checks names by what they resolve to, refuses names that do not resolve, and says nothing of either', async () => {
    const generic = 'must lead to a public address (names must resolve to public unicast addresses only)';
    for (const url of [
      'http://localhost:9/',
      'http://localhost.:9/',
      'http://[::1]/',
      'http://nothing-here.invalid/',
      'http://[::127.0.0.1]/',
    ]) {
      expect(await destinationProblem(new URL(url), false), url).toBe(generic);
    }
    expect(await destinationProblem(new URL('http://localhost:9/'), true)).toBeUndefined();
    expect(await destinationProblem(new URL('http://8.8.8.8/'), false)).toBeUndefined();
  });
});

describe('retry schedule', () => {
  const policy = { timeoutMs: 1000, allowPrivate: false, retrySchedule: [5, 300, 1800] };
  it('waits each step of the schedule within ±20 %, then gives up', () => {
    expect(retryDelayMs(policy, 1, () => 0)).toBe(4000);
    expect(retryDelayMs(policy, 1, () => 1)).toBe(6000);
    expect(retryDelayMs(policy, 2, () => 0.5)).toBe(300_000);
    expect(retryDelayMs(policy, 3, () => 0.5)).toBe(1_800_000);
    expect(retryDelayMs(policy, 4)).toBeUndefined();
  });

  it('lasts more than a day by default', async () => {
    const { configSchema } = await import('../../../shared/config.js');
    const schedule = configSchema.parse({}).WEBHOOK_RETRY_SCHEDULE;
    expect(schedule.reduce((sum, seconds) => sum + seconds * 0.8, 0)).toBeGreaterThan(24 * 3600);
  });
});

describe('sending one attempt', () => {
  let port: number;
  const server = createServer((request, response) => {
    if (request.url === '/redirect') return void response.writeHead(307, { location: '/ok' }).end();
    if (request.url === '/slow') return void setTimeout(() => response.writeHead(200).end(), 2000);
    response.writeHead(request.url === '/ok' ? 200 : 500).end();
  });
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  const allowed = { timeoutMs: 1000, allowPrivate: true };

  it('counts only a 2xx as delivered, and follows no redirect', async () => {
    expect(await send(`http://127.0.0.1:${port}/ok`, '{}', {}, allowed)).toMatchObject({ ok: true, status: 200, error: null });
    expect(await send(`http://127.0.0.1:${port}/fail`, '{}', {}, allowed)).toMatchObject({ ok: false, status: 500 });
    expect(await send(`http://127.0.0.1:${port}/redirect`, '{}', {}, allowed)).toMatchObject({
      ok: false,
      status: 307,
      error: 'redirect (307) not followed',
    });
  });

  it('times out', async () => {
    const outcome = await send(`http://127.0.0.1:${port}/slow`, '{}', {}, { timeoutMs: 200, allowPrivate: true });
    expect(outcome).toMatchObject({ ok: false, status: null, error: 'timed out after 200 ms' });
    expect(outcome.durationMs).toBeLessThan(1000);
  });

  it('refuses private destinations at connect time, literal or resolved', async () => {
    const denied = { timeoutMs: 1000, allowPrivate: false };
    expect((await send(`http://127.0.0.1:${port}/ok`, '{}', {}, denied)).error).toBe('refused: not a public address');
    expect((await send(`http://localhost:${port}/ok`, '{}', {}, denied)).error).toBe('refused: not a public address');
    expect((await send(`http://127.0.0.1:1/closed`, '{}', {}, allowed)).error).toBe('could not connect');
    expect((await send(`http://localhost:${port}/ok`, '{}', {}, allowed)).ok).toBe(true);
  });
});
