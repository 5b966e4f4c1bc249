import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { registry } from '../../shared/metrics/metrics.js';
import { sign } from '../../shared/webhooks/signature.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import { EventTimeVenue } from '../../testkit/event-time.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { WebhookReceiver, type Receipt } from '../../testkit/webhook-receiver.js';

const urlFingerprintOf = (url: string) => `sha256:${createHash('sha256').update(url).digest('hex').slice(0, 16)}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** floorcast_webhook_deliveries_total by outcome, as /metrics publishes it (the workers run in this process). */
async function attemptsCounted(): Promise<Record<'delivered' | 'failed' | 'dead' | 'refused', number>> {
  const metric = await registry.getSingleMetric('floorcast_webhook_deliveries_total')!.get();
  const of = (outcome: string) => metric.values.find((value) => value.labels.outcome === outcome)?.value ?? 0;
  return { delivered: of('delivered'), failed: of('failed'), dead: of('dead'), refused: of('refused') };
}

async function until<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Checks a receipt the way a Standard Webhooks receiver would. */
function verify(receipt: Receipt, secret: string): void {
  expect(receipt.signature).toBe(sign(secret, receipt.id, Number(receipt.timestamp), receipt.body));
  expect(Math.abs(Number(receipt.timestamp) - Date.now() / 1000)).toBeLessThan(60);
}

/** Ids in first-arrival order; `ordered` holds when no id comes back after a later one was first seen. */
function arrival(receipts: Receipt[]): { firstSeen: string[]; ordered: boolean } {
  const firstSeen: string[] = [];
  let ordered = true;
  for (const receipt of receipts) {
    const index = firstSeen.indexOf(receipt.id);
    if (index === -1) firstSeen.push(receipt.id);
    else if (index !== firstSeen.length - 1) ordered = false;
  }
  return { firstSeen, ordered };
}

// Retries after ~0.2 s, 0.2 s, 1 s, 1 s, 1 s (jitter aside): dead after six attempts, about 3.4 s.
const SETTINGS = { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true', WEBHOOK_RETRY_SCHEDULE: '0.2,0.2,1,1,1', WEBHOOK_TIMEOUT_MS: '2000' };

describe(`outbound webhooks (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let receiver: WebhookReceiver;

  const create = async (path: string, events: string[], extra: object = {}) => {
    const response = await admin.post('/api/v1/webhooks', { url: receiver.url(path), events, ...extra });
    expect(response.status, response.text).toBe(201);
    return response.body as { id: string; secret: string };
  };
  const deliveries = async (webhookId: string) => (await admin.get(`/api/v1/webhooks/${webhookId}/deliveries?size=100`)).body.data as any[];

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    running = await startTestGateway(SETTINGS);
    admin = await adminClient(running.client);
  });
  afterAll(async () => {
    await running?.stop();
    await receiver?.close();
  });

  it('creates, reads, changes and deletes webhooks; the secret is shown once, admins only', async () => {
    const created = await admin.post('/api/v1/webhooks', { url: receiver.url('/crud'), events: ['alarm.raised'], description: 'pager' });
    expect(created.status, created.text).toBe(201);
    expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(created.body).toMatchObject({ url: receiver.url('/crud'), events: ['alarm.raised'], building_ids: null, description: 'pager' });
    const read = await admin.get(`/api/v1/webhooks/${created.body.id}`);
    expect(read.body.secret).toBeUndefined();
    expect((await admin.get('/api/v1/webhooks')).body.map((hook: { id: string }) => hook.id)).toContain(created.body.id);
    const changed = await admin.patch(`/api/v1/webhooks/${created.body.id}`, { events: ['geofence.enter', 'geofence.exit'] });
    expect(changed.body.events).toEqual(['geofence.enter', 'geofence.exit']);
    expect((await admin.post('/api/v1/webhooks', { url: 'ftp://example.com/', events: ['alarm.raised'] })).status).toBe(422);
    expect((await admin.post('/api/v1/webhooks', { url: receiver.url(), events: ['alarm.nope'] })).status).toBe(422);
    expect((await admin.post('/api/v1/webhooks', { url: receiver.url(), events: ['alarm.raised'], building_ids: [999_999] })).status).toBe(
      422,
    );
    const manager = await createUser(admin, 'user_manager');
    expect((await manager.client.get('/api/v1/webhooks')).status).toBe(403);
    expect((await admin.delete(`/api/v1/webhooks/${created.body.id}`)).status).toBe(204);
    expect((await admin.get(`/api/v1/webhooks/${created.body.id}`)).status).toBe(404);
  });

  it('shows and audits a URL without its credentials (userinfo, query values), with a fingerprint; delivers to the real one', async () => {
    const secretUrl = receiver.url('/secret-url?token=abc123&team=ops').replace('http://', 'http://hook-user:hunter2@');
    const created = await admin.post('/api/v1/webhooks', { url: secretUrl, events: ['alarm.raised'] });
    expect(created.status, created.text).toBe(201);
    const redacted = receiver.url('/secret-url?token=***&team=***').replace('http://', 'http://***@');
    const read = await admin.get(`/api/v1/webhooks/${created.body.id}`);
    expect(read.body.url).toBe(redacted);
    expect(read.body.url_fingerprint).toMatch(/^sha256:[0-9a-f]{16}$/);
    expect(created.body.url_fingerprint).toBe(read.body.url_fingerprint);
    const listed = (await admin.get('/api/v1/webhooks')).body.find((hook: { id: string }) => hook.id === created.body.id);
    expect(listed.url).toBe(redacted);
    const other = await admin.post('/api/v1/webhooks', { url: secretUrl.replace('abc123', 'abc124'), events: ['alarm.raised'] });
    expect(other.body.url_fingerprint).not.toBe(read.body.url_fingerprint);
    expect(
      (await admin.patch(`/api/v1/webhooks/${created.body.id}`, { url: secretUrl.replace('abc123', 'xyz789'), description: 'rotated' }))
        .body.url,
    ).toBe(redacted);
    const audit = JSON.stringify((await admin.get(`/api/v1/audit?object_type=webhooks&object_id=${created.body.id}`)).body);
    for (const secret of ['hunter2', 'abc123', 'xyz789']) expect(audit).not.toContain(secret);
    expect(audit).toContain(read.body.url_fingerprint);
    // Sending the webhook back as read keeps the real URL.
    const echoed = await admin.patch(`/api/v1/webhooks/${created.body.id}`, { url: redacted, description: 'echoed' });
    expect(echoed.status, echoed.text).toBe(200);
    expect(echoed.body.url_fingerprint).toBe(urlFingerprintOf(secretUrl.replace('abc123', 'xyz789')));
    receiver.respond = () => 204;
    await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'secret-url' });
    const [receipt] = await until(
      'the delivery',
      () => receiver.delivered('/secret-url?token=xyz789&team=ops').length >= 1 && receiver.delivered('/secret-url?token=xyz789&team=ops'),
    );
    expect(JSON.parse(receipt!.body).type).toBe('alarm.raised');
    await admin.delete(`/api/v1/webhooks/${created.body.id}`);
    await admin.delete(`/api/v1/webhooks/${other.body.id}`);
  });

  it('records a generic last_error: no address or port of what refused the connection', async () => {
    const closed = await WebhookReceiver.start();
    const url = closed.url('/closed');
    await closed.close();
    const hook = (await admin.post('/api/v1/webhooks', { url, events: ['alarm.raised'] })).body;
    await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'closed-port' });
    const [failed] = await until('a failed attempt', async () => {
      const listed = await deliveries(hook.id);
      return listed[0]?.attempts >= 1 && listed;
    });
    expect(failed.last_error).toBe('could not connect');
    expect(JSON.stringify(failed)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|:\d{4,5}/);
    await admin.delete(`/api/v1/webhooks/${hook.id}`);
  });

  it('delivers every alarm event exactly once per webhook-id after retries, signed, in order per alarm', async () => {
    const hook = await create('/alarms', ['alarm.raised', 'alarm.updated', 'alarm.state_changed']);
    receiver.respond = (receipt, attempt) => (receipt.path === '/alarms' && attempt <= 2 ? 503 : 204);
    const countedBefore = await attemptsCounted();
    const first = (await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'hook-a' })).body;
    await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'hook-a' }); // a repeat: alarm.updated
    expect((await admin.patch(`/api/v1/alarms/${first.id}`, { state: 'CONFIRMED' })).status).toBe(200);
    const second = (await admin.post('/api/v1/alarms', { type: 'ASSISTANCE_REQUEST', device_id: 'hook-b' })).body;

    const delivered = await until(
      'four alarm deliveries',
      () => receiver.delivered('/alarms').length >= 4 && receiver.delivered('/alarms'),
    );
    await sleep(300); // anything sent twice would arrive now
    const ok = receiver.delivered('/alarms');
    expect(ok).toHaveLength(4);
    expect(new Set(ok.map((receipt) => receipt.id)).size).toBe(4);
    for (const receipt of ok) verify(receipt, hook.secret);
    const bodies = ok.map((receipt) => JSON.parse(receipt.body));
    // Another alarm's events may overtake a failing one; one alarm's events arrive in order.
    const ofFirst = bodies.filter((body) => body.data.id === first.id);
    expect(ofFirst.map((body) => body.type)).toEqual(['alarm.raised', 'alarm.updated', 'alarm.state_changed']);
    expect(ofFirst.map((body) => body.data.seq)).toEqual([...ofFirst.map((body) => body.data.seq)].sort((a, b) => a - b));
    expect(ofFirst[0].timestamp).toBe(first.created_at);
    expect(bodies.filter((body) => body.data.id === second.id).map((body) => body.type)).toEqual(['alarm.raised']);
    // Each id failed twice before it went through, and the next event of its alarm waited for it.
    const all = receiver.receipts.filter((receipt) => receipt.path === '/alarms');
    expect(all).toHaveLength(12);
    // Every attempt is counted by its outcome. At least: the earlier test's hook to a closed port keeps failing.
    const counted = await attemptsCounted();
    expect(counted.delivered - countedBefore.delivered).toBe(4);
    expect(counted.failed - countedBefore.failed).toBeGreaterThanOrEqual(8);
    const firstIds = new Set(delivered.filter((receipt) => JSON.parse(receipt.body).data.id === first.id).map((receipt) => receipt.id));
    const { firstSeen, ordered } = arrival(all.filter((receipt) => firstIds.has(receipt.id)));
    expect(ordered).toBe(true);
    expect(firstSeen).toEqual(delivered.filter((receipt) => firstIds.has(receipt.id)).map((receipt) => receipt.id));

    const listed = await deliveries(hook.id);
    expect(listed).toHaveLength(4);
    for (const delivery of listed) {
      expect(delivery).toMatchObject({ status: 'succeeded', attempts: 3, last_response_code: 204, next_attempt_at: null });
      expect(delivery.attempt_log.map((entry: { response_code: number }) => entry.response_code)).toEqual([503, 503, 204]);
    }
  });

  it('delivers geofence enters and exits of the buildings asked for', async () => {
    const venue = await createVenue(admin, 'Webhook venue');
    const other = await createVenue(admin, 'Other venue');
    const hook = await create('/fences', ['geofence.enter', 'geofence.exit'], { building_ids: [venue.building.id] });
    receiver.respond = () => 204;
    for (const place of [venue, other]) {
      const fence = await admin.post('/api/v1/geofences', {
        name: 'Ward',
        building_id: place.building.id,
        floor_id: place.floors[0].id,
        type: 'POLYGON',
        cartesians: squareCartesians(10, 10, 10),
      });
      expect(fence.status, fence.text).toBe(201);
    }
    const at = (place: typeof venue, x: number, y: number) => ({
      device_id: `walker-${place.building.id}`,
      timestamp: Date.now(),
      building_id: place.building.id,
      floor_id: place.floors[0].id,
      x,
      y,
    });
    for (const [x, y] of [
      [5, 5],
      [15, 15],
      [30, 30],
    ] as const) {
      expect((await admin.post('/api/v1/realtime/positions', { poses: [at(venue, x, y), at(other, x, y)] })).status).toBe(204);
      await sleep(50);
    }
    const ok = await until('enter and exit', () => receiver.delivered('/fences').length >= 2 && receiver.delivered('/fences'));
    await sleep(300);
    expect(receiver.delivered('/fences')).toHaveLength(2);
    const bodies = ok.map((receipt) => JSON.parse(receipt.body));
    expect(bodies.map((body) => [body.type, body.data.building_id, body.data.geofence_name, body.data.device_id])).toEqual([
      ['geofence.enter', venue.building.id, 'Ward', `walker-${venue.building.id}`],
      ['geofence.exit', venue.building.id, 'Ward', `walker-${venue.building.id}`],
    ]);
    for (const receipt of ok) verify(receipt, hook.secret);
  });

  it('delivers late enters and exits with their event time, and a correction naming the event it supersedes (issue 30)', async () => {
    const created = await createVenue(admin, 'Late webhook venue');
    const venue = new EventTimeVenue(running, admin, created.building.id, created.floors[0].id);
    const ward = await venue.fence('Ward', 10, 10, 10);
    await create('/late', ['geofence.enter', 'geofence.exit'], { building_ids: [venue.buildingId] });
    receiver.respond = () => 204;
    const t0 = Date.now() - 10 * 60_000;
    const s = (seconds: number) => t0 + seconds * 1000;
    await venue.upload([venue.pose('offline', s(0), 15, 15)]);
    await venue.settle();
    // Back online: the live fix (outside) implies an exit at 50 s; the buffer then shows the device left at 10 s,
    // came back at 20 s and left again at 30 s.
    await venue.upload([venue.pose('offline', s(50), 30, 15)]);
    await venue.settle();
    await venue.upload([venue.pose('offline', s(30), 30, 15), venue.pose('offline', s(20), 15, 15), venue.pose('offline', s(10), 30, 15)]);
    await venue.settle();
    // The device's (settle's sentinel walks a fence of the same building).
    const delivered = () => receiver.delivered('/late').filter((receipt) => JSON.parse(receipt.body).data.device_id === 'offline');
    await until('five geofence deliveries', () => delivered().length >= 5);
    await sleep(300);
    expect(delivered()).toHaveLength(5);
    const data = delivered()
      .map((receipt) => JSON.parse(receipt.body).data)
      .sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
    const iso = (seconds: number) => new Date(s(seconds)).toISOString();
    expect(data.map((event) => [event.type, event.geofence_id, event.at, event.late, event.supersedes])).toEqual([
      ['enter', ward, iso(0), false, null],
      ['exit', ward, iso(10), true, null],
      ['enter', ward, iso(20), true, null],
      // The new exit nearest in time to the one the live fix implied names it.
      ['exit', ward, iso(30), true, { type: 'exit', at: iso(50) }],
      ['exit', ward, iso(50), false, null],
    ]);
    for (const event of data) {
      if (event.late) expect(event.delay_ms).toBeGreaterThan(9 * 60_000);
      else expect(event.delay_ms).toBeNull();
    }
  });

  it('delivers device.event when a device enters an event area', async () => {
    const venue = await createVenue(admin, 'Event venue');
    const hook = await create('/device-events', ['device.event']);
    receiver.respond = () => 204;
    const area = await admin.post('/api/v1/events', {
      building_id: venue.building.id,
      name: 'Welcome desk',
      info: 'Say hello',
      position: { floor_id: venue.floors[0].id, cartesians: { x: 40, y: 40 }, radius: 3 },
    });
    expect(area.status, area.text).toBe(201);
    const pose = (x: number) => ({
      device_id: 'visitor',
      timestamp: Date.now(),
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x,
      y: 40,
    });
    expect((await admin.post('/api/v1/realtime/positions', { poses: [pose(10)] })).status).toBe(204);
    await sleep(50);
    expect((await admin.post('/api/v1/realtime/positions', { poses: [pose(40)] })).status).toBe(204);
    const [receipt] = await until(
      'the device event',
      () => receiver.delivered('/device-events').length >= 1 && receiver.delivered('/device-events'),
    );
    const body = JSON.parse(receipt!.body);
    expect(body).toMatchObject({
      type: 'device.event',
      data: { device_id: 'visitor', building_id: venue.building.id, event: { id: area.body.id, name: 'Welcome desk' } },
    });
    verify(receipt!, hook.secret);
  });

  it('dead-letters after the retry schedule (a redirect is a failure), and redelivers a dead delivery', async () => {
    const hook = await create('/dead', ['alarm.raised']);
    receiver.respond = (receipt) => (receipt.path === '/dead' ? 302 : 204);
    const countedBefore = await attemptsCounted();
    await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'hook-dead' });
    const [dead] = await until('a dead delivery', async () => {
      const listed = await deliveries(hook.id);
      return listed[0]?.status === 'dead' && listed;
    });
    expect(dead).toMatchObject({ status: 'dead', attempts: 6, last_response_code: 302, last_error: 'redirect (302) not followed' });
    expect(receiver.receipts.filter((receipt) => receipt.path === '/dead')).toHaveLength(6);
    const counted = await attemptsCounted();
    expect(counted.failed - countedBefore.failed).toBeGreaterThanOrEqual(5);
    expect(counted.dead - countedBefore.dead).toBeGreaterThanOrEqual(1);

    receiver.respond = () => 204;
    const again = await admin.post(`/api/v1/webhooks/${hook.id}/deliveries/${dead.id}/redeliver`);
    expect(again.status, again.text).toBe(202);
    expect(again.body.status).toBe('pending');
    await until('the redelivery', async () => (await deliveries(hook.id))[0]?.status === 'succeeded');
    const ok = receiver.delivered('/dead');
    expect(ok.map((receipt) => receipt.id)).toEqual([dead.id]);
    verify(ok[0]!, hook.secret);
    expect((await admin.post(`/api/v1/webhooks/${hook.id}/deliveries/${dead.id}/redeliver`)).status).toBe(409);
  });

  it('loses nothing when the gateway restarts mid-retry', async () => {
    const hook = await create('/restart', ['alarm.raised']);
    let down = true;
    receiver.respond = (receipt) => (receipt.path === '/restart' && down ? 500 : 204);
    const raised = [];
    for (const device of ['restart-1', 'restart-2'])
      raised.push((await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: device })).body);
    await until('a failed attempt', () => receiver.receipts.some((receipt) => receipt.path === '/restart'));
    running = await running.restart();
    admin = await adminClient(running.client);
    down = false;
    const ok = await until(
      'both deliveries after the restart',
      () => receiver.delivered('/restart').length >= 2 && receiver.delivered('/restart'),
    );
    await sleep(300);
    expect(receiver.delivered('/restart')).toHaveLength(2);
    expect(ok.map((receipt) => JSON.parse(receipt.body).data.id).sort()).toEqual(raised.map((alarm) => alarm.id).sort());
    for (const receipt of ok) verify(receipt, hook.secret);
  });
});

describe(`outbound webhooks refuse private addresses by default (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;

  beforeAll(async () => {
    running = await startTestGateway({ WEBHOOK_RETRY_SCHEDULE: '0.1' });
    admin = await adminClient(running.client);
  });
  afterAll(async () => {
    await running?.stop();
  });

  it.each([
    'http://127.0.0.1:8080/',
    'http://localhost/',
    'http://localhost./',
    'http://a.localhost/',
    'http://10.1.2.3/',
    'http://172.16.0.1/',
    'http://192.168.1.1/',
    'http://169.254.169.254/latest',
    'http://100.64.0.1/',
    'http://0.0.0.0/',
    'http://[::1]/',
    'http://[fd00::1]/',
    'http://[fe80::1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::127.0.0.1]/',
    'http://[64:ff9b:1::7f00:1]/',
    'http://[2002:7f00:1::1]/',
    'http://[fec0::1]/',
    'http://[2001::7f00:1]/',
    // `.invalid` never resolves (RFC 6761): a name that does not resolve now is refused, and says nothing more.
    'https://hooks.example.invalid/',
  ])('refuses %s with a generic 422', async (url) => {
    const response = await admin.post('/api/v1/webhooks', { url, events: ['alarm.raised'] });
    expect(response.status, response.text).toBe(422);
    expect(response.body.errors).toEqual([
      { field: 'url', message: 'must lead to a public address (names must resolve to public unicast addresses only)' },
    ]);
  });

  // A public literal: no DNS, and no traffic leaves the machine (nothing is raised for it).
  it('refuses a change of URL to a private address', async () => {
    const created = await admin.post('/api/v1/webhooks', { url: 'https://93.184.215.14/', events: ['geofence.enter'] });
    expect(created.status, created.text).toBe(201);
    expect((await admin.patch(`/api/v1/webhooks/${created.body.id}`, { url: 'http://192.168.0.10/' })).status).toBe(422);
  });

  it('refuses at delivery time too: a row pointing inwards is never sent', async () => {
    const receiver = await WebhookReceiver.start();
    try {
      const created = await admin.post('/api/v1/webhooks', { url: 'https://93.184.215.14/', events: ['alarm.raised'] });
      // As if the URL had been stored when it was allowed (or the name resolved elsewhere then).
      await running.gateway.services.storage.execute('update webhooks set url = ? where id = ?', [
        receiver.url('/inside'),
        created.body.id,
      ]);
      await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'ssrf' });
      const [dead] = await until('the refused delivery to be dead', async () => {
        const listed = (await admin.get(`/api/v1/webhooks/${created.body.id}/deliveries`)).body.data;
        return listed[0]?.status === 'dead' && listed;
      });
      expect(dead.last_error).toBe('refused: not a public address');
      expect(dead.last_response_code).toBeNull();
      expect(receiver.receipts).toEqual([]);
    } finally {
      await receiver.close();
    }
  });
});
