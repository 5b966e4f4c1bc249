import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registry } from '../../shared/metrics/metrics.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { WebhookReceiver, type Receipt } from '../../testkit/webhook-receiver.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

const body = (receipt: Pick<Receipt, 'body'>) => JSON.parse(receipt.body) as { type: string; data: Record<string, any> };

// A failed delivery is retried every ~1 s for about 30 s: long enough that a line held by it would show.
const SETTINGS = {
  WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true',
  WEBHOOK_RETRY_SCHEDULE: Array(30).fill('1').join(','),
  WEBHOOK_TIMEOUT_MS: '2000',
};

describe(`webhook deliveries: a failing one never holds back a later alarm (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let receiver: WebhookReceiver;

  const create = async (client: TestClient, path: string, events: string[]) => {
    const response = await client.post('/api/v1/webhooks', { url: receiver.url(path), events });
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

  it('a delivery the receiver refuses moves aside: a colleague’s DANGER raised a second later arrives while it is still retried', async () => {
    const hook = await create(admin, '/waf', ['alarm.raised', 'alarm.updated']);
    // As a web application firewall would: refuse any body that looks like markup.
    receiver.respond = (receipt) => (receipt.path === '/waf' && receipt.body.includes('<script') ? 403 : 204);
    const plain = await createUser(admin, 'user');
    const colleague = await createUser(admin, 'user');
    const poisoned = await plain.client.post('/api/v1/alarms', { type: 'ASSISTANCE_REQUEST', comment: '<script>alert(1)</script>' });
    expect(poisoned.status, poisoned.text).toBe(201);
    await until('the refused attempt', () => receiver.receipts.some((receipt) => receipt.path === '/waf' && receipt.status === 403));
    await sleep(1000);
    const danger = await colleague.client.post('/api/v1/alarms', { type: 'DANGER', comment: 'smoke in ward 3' });
    expect(danger.status, danger.text).toBe(201);

    const [arrived] = await until('the DANGER', () => receiver.delivered('/waf').length >= 1 && receiver.delivered('/waf'));
    expect(body(arrived!)).toMatchObject({ type: 'alarm.raised', data: { id: danger.body.id, type: 'DANGER' } });
    // It did not wait for the refused one to run out of retries: that one is still being retried.
    const listed = await deliveries(hook.id);
    const refused = listed.find((delivery) => delivery.payload.data.id === poisoned.body.id);
    expect(refused).toMatchObject({ status: 'pending', last_response_code: 403 });
    expect(refused.attempts).toBeLessThan(SETTINGS.WEBHOOK_RETRY_SCHEDULE.split(',').length + 1);
    expect(listed.find((delivery) => delivery.payload.data.id === danger.body.id)).toMatchObject({ status: 'succeeded', attempts: 1 });
  });

  it('a burst of alarm.updated of one alarm coalesces behind its raised; a later DANGER’s alarm.raised goes ahead of it; order per alarm holds', async () => {
    await create(admin, '/burst', ['alarm.raised', 'alarm.updated', 'alarm.state_changed']);
    let refuseFirst = true;
    receiver.respond = (receipt) => {
      if (receipt.path !== '/burst') return 204;
      const event = body(receipt);
      return refuseFirst && event.data.device_id === 'burst-a' ? 503 : 204;
    };
    const { alarms } = running.gateway.services;
    const by = 'system' as const;
    const [{ organization_id: organizationId }] = (await running.gateway.services.storage.execute<{ organization_id: string }>(
      `select organization_id from users where email = 'admin@example.test'`,
    )) as [{ organization_id: string }];
    const raised = await alarms.raise({ organizationId, type: 'DANGER', deviceId: 'burst-a', by });
    await until('burst-a refused once', () => receiver.receipts.some((receipt) => receipt.path === '/burst' && receipt.status === 503));
    // A danger-button flood: 500 repeats of one OPEN alarm, each an alarm.updated.
    for (let i = 0; i < 500; i++) await alarms.raise({ organizationId, type: 'DANGER', deviceId: 'burst-a', by });
    const later = await alarms.raise({ organizationId, type: 'DANGER', deviceId: 'burst-b', by });
    await until('burst-b raised', () => receiver.delivered('/burst').some((receipt) => body(receipt).data.id === later.event.id));
    refuseFirst = false;
    await until('burst-a updated', () => receiver.delivered('/burst').some((receipt) => body(receipt).type === 'alarm.updated'));
    await sleep(500); // anything more would arrive now

    const ok = receiver.delivered('/burst').map(body);
    expect(ok.map((event) => [event.type, event.data.id])).toEqual([
      ['alarm.raised', later.event.id],
      ['alarm.raised', raised.event.id],
      ['alarm.updated', raised.event.id],
    ]);
    // The one update sent carries the latest state.
    expect(ok[2]!.data.occurrences).toBe(501);

    // Order per alarm: raised, updated, state_changed of one alarm arrive in that order, whatever the others do.
    refuseFirst = true;
    const again = await alarms.raise({ organizationId, type: 'ASSISTANCE_REQUEST', deviceId: 'burst-a', by });
    await until(
      'the new burst-a alarm refused',
      () => receiver.receipts.filter((receipt) => receipt.path === '/burst' && receipt.status === 503).length >= 2,
    );
    await alarms.raise({ organizationId, type: 'ASSISTANCE_REQUEST', deviceId: 'burst-a', by });
    expect((await admin.patch(`/api/v1/alarms/${again.event.id}`, { state: 'CONFIRMED' })).status).toBe(200);
    const other = await alarms.raise({ organizationId, type: 'DANGER', deviceId: 'burst-c', by });
    await until('burst-c', () => receiver.delivered('/burst').some((receipt) => body(receipt).data.id === other.event.id));
    refuseFirst = false;
    await until('the state change', () => receiver.delivered('/burst').some((receipt) => body(receipt).type === 'alarm.state_changed'));
    const ofAgain = receiver
      .delivered('/burst')
      .map(body)
      .filter((event) => event.data.id === again.event.id);
    expect(ofAgain.map((event) => event.type)).toEqual(['alarm.raised', 'alarm.updated', 'alarm.state_changed']);
    expect(ofAgain.map((event) => event.data.seq)).toEqual([...ofAgain.map((event) => event.data.seq)].sort((a, b) => a - b));
  });

  it('a zone event’s deliveries are stored with it: losing the step after the commit loses none', async () => {
    const venue = await createVenue(admin, 'Crash venue');
    const hook = await create(admin, '/zones', ['geofence.enter', 'geofence.exit']);
    receiver.respond = () => 204;
    const fence = await admin.post('/api/v1/geofences', {
      name: 'Ward',
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      type: 'POLYGON',
      cartesians: squareCartesians(10, 10, 10),
    });
    expect(fence.status, fence.text).toBe(201);
    // As if the process died right after the zone events committed: nothing that runs after the commit happens.
    const { webhooks, storage } = running.gateway.services;
    const afterCommit = webhooks.detectionsStored;
    webhooks.detectionsStored = async () => undefined;
    try {
      const at = (x: number) => ({
        device_id: 'crash-walker',
        timestamp: Date.now(),
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        x,
        y: x,
      });
      expect((await admin.post('/api/v1/realtime/positions', { poses: [at(30)] })).status).toBe(204);
      await sleep(50);
      expect((await admin.post('/api/v1/realtime/positions', { poses: [at(15)] })).status).toBe(204);
      await until(
        'the stored enter',
        async () => (await storage.execute(`select 1 from zone_events where device_id = 'crash-walker' and type = 'enter'`)).length > 0,
      );
      const owed = await storage.execute<{ event_type: string }>(`select event_type from webhook_deliveries where webhook_id = ?`, [
        hook.id,
      ]);
      expect(owed.map((row) => row.event_type)).toEqual(['geofence.enter']);
      const [receipt] = await until('the enter delivered', () => receiver.delivered('/zones').length >= 1 && receiver.delivered('/zones'));
      expect(body(receipt!)).toMatchObject({ type: 'geofence.enter', data: { device_id: 'crash-walker', geofence_id: fence.body.id } });
    } finally {
      webhooks.detectionsStored = afterCommit;
    }
  });

  it('a job cannot lift the address rules: a worker takes allowPrivate from its own configuration, not from job data', async () => {
    const strict = await startTestGateway({ WEBHOOK_RETRY_SCHEDULE: '0.1' });
    try {
      const strictAdmin = await adminClient(strict.client);
      const { storage, jobs } = strict.gateway.services;
      const created = await strictAdmin.post('/api/v1/webhooks', { url: 'http://93.184.215.14/hook', events: ['alarm.raised'] });
      expect(created.status, created.text).toBe(201);
      await storage.execute('update webhooks set url = ? where id = ?', [receiver.url('/inward'), created.body.id]);
      const [row] = await storage.execute<{ organization_id: string }>('select organization_id from webhooks where id = ?', [
        created.body.id,
      ]);
      const [delivery] = await storage.execute<{ id: string }>(
        `insert into webhook_deliveries (id, webhook_id, organization_id, event_key, event_type, payload, job_token, attempts, next_attempt_at)
         values (gen_random_uuid(), ?, ?, 'forged', 'alarm.raised', '{}', '00000000-0000-4000-8000-000000000001', 1, now()) returning id`,
        [created.body.id, row!.organization_id],
      );
      // A job as someone who can write to Redis would forge it, asking for private addresses.
      await jobs.schedule({
        name: 'webhook-delivery',
        organizationId: row!.organization_id,
        data: {
          deliveryId: delivery!.id,
          token: '00000000-0000-4000-8000-000000000001',
          policy: { timeoutMs: 2000, allowPrivate: true, retrySchedule: [] },
        },
      });
      const dead = await until('the forged delivery settled', async () => {
        const [current] = await storage.execute<{ status: string; last_error: string | null }>(
          'select status, last_error from webhook_deliveries where id = ?',
          [delivery!.id],
        );
        return current?.status !== 'pending' && current;
      });
      expect(dead.status).toBe('dead');
      expect(receiver.receipts.filter((receipt) => receipt.path === '/inward')).toEqual([]);
    } finally {
      await strict.stop();
    }
  });
});

describe(`webhook state is bounded (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    running = await startTestGateway({
      ...SETTINGS,
      WEBHOOK_MAX_PENDING_PER_WEBHOOK: '3',
      WEBHOOK_MAX_PER_ORGANIZATION: '2',
      WEBHOOK_DEAD_RETENTION_DAYS: '7',
    });
    admin = await adminClient(running.client);
  });
  afterAll(async () => {
    await running?.stop();
    await receiver?.close();
  });

  const capped = async () =>
    (await registry.getSingleMetric('floorcast_webhook_deliveries_capped_total')?.get())?.values.reduce(
      (sum, value) => sum + value.value,
      0,
    ) ?? 0;

  it('caps pending deliveries per webhook, counting what the cap turned away; alarm.raised is never turned away', async () => {
    const hook = (await admin.post('/api/v1/webhooks', { url: receiver.url('/down'), events: ['alarm.raised', 'alarm.state_changed'] }))
      .body;
    receiver.respond = () => 503;
    const before = await capped();
    const raised = [];
    for (let i = 0; i < 5; i++) raised.push((await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: `cap-${i}` })).body);
    for (const alarm of raised) expect((await admin.patch(`/api/v1/alarms/${alarm.id}`, { state: 'CONFIRMED' })).status).toBe(200);
    const rows = await running.gateway.services.storage.execute<{ event_type: string }>(
      `select event_type from webhook_deliveries where webhook_id = ? and status = 'pending'`,
      [hook.id],
    );
    expect(rows.filter((row) => row.event_type === 'alarm.raised')).toHaveLength(5);
    expect(rows.filter((row) => row.event_type === 'alarm.state_changed')).toHaveLength(0);
    expect((await capped()) - before).toBe(5);

    // The backlog's age, for alerting: the oldest pending delivery has waited since it was stored.
    await running.gateway.services.storage.execute(
      `update webhook_deliveries set created_at = now() - interval '1 hour' where webhook_id = ? and status = 'pending'`,
      [hook.id],
    );
    await running.gateway.services.webhooks.measureBacklog();
    const oldest = (await registry.getSingleMetric('floorcast_webhook_oldest_pending_seconds')?.get())?.values[0]?.value ?? 0;
    expect(oldest).toBeGreaterThanOrEqual(3600);
    expect(oldest).toBeLessThan(3600 + 600);
  });

  it('caps webhooks per organization', async () => {
    const second = await admin.post('/api/v1/webhooks', { url: receiver.url('/second'), events: ['alarm.raised'] });
    expect(second.status, second.text).toBe(201);
    const third = await admin.post('/api/v1/webhooks', { url: receiver.url('/third'), events: ['alarm.raised'] });
    expect(third.status, third.text).toBe(409);
    expect(third.body.message).toMatch(/at most 2 webhooks/);
    expect((await admin.get('/api/v1/webhooks')).body).toHaveLength(2);
  });

  it('prunes dead deliveries after the retention period, and nothing else', async () => {
    const { storage, webhooks } = running.gateway.services;
    const [hook] = await storage.execute<{ id: string; organization_id: string }>(
      'select id, organization_id from webhooks order by created_at limit 1',
    );
    const insert = (key: string, status: string, daysAgo: number) =>
      storage.execute(
        `insert into webhook_deliveries (id, webhook_id, organization_id, event_key, event_type, payload, status, updated_at)
         values (gen_random_uuid(), ?, ?, ?, 'alarm.raised', '{}', ?, now() - make_interval(days => ?))`,
        [hook!.id, hook!.organization_id, key, status, daysAgo],
      );
    await insert('old-dead', 'dead', 8);
    await insert('young-dead', 'dead', 6);
    await insert('old-delivered', 'succeeded', 8);
    await webhooks.prune();
    const left = await storage.execute<{ event_key: string }>(
      `select event_key from webhook_deliveries where event_key in ('old-dead', 'young-dead', 'old-delivered') order by event_key`,
    );
    expect(left.map((row) => row.event_key)).toEqual(['old-delivered', 'young-dead']);
  });
});
