import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * Review NH4: a held danger button (a thousand danger poses in one upload) is one alarm write and one alarm event;
 * repeats within the debounce only count occurrences; raises count against a small budget per credential.
 * The debounce is set long here so that no assertion depends on how fast the machine is.
 */
describe(`the alarm button cannot flood (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  const BUDGET = 5;

  beforeAll(async () => {
    running = await startTestGateway({ ALARM_BUTTON_DEBOUNCE_S: '3600', ALARM_BUTTON_RAISES_PER_MINUTE: String(BUDGET) });
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Button venue');
  });
  afterAll(async () => {
    await running?.stop();
  });

  const presses = (deviceId: string, count: number, from: number) =>
    Array.from({ length: count }, (_, index) => ({
      device_id: deviceId,
      timestamp: from + index,
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x: 10 + (index % 50),
      y: 20,
      danger: true,
    }));
  const alarmOf = async (deviceId: string) => {
    const { storage } = running.gateway.services;
    const alarms = await storage.execute<{ id: string; occurrences: number; x: number }>(
      "select id, occurrences, x from alarms where device_id = ? and type = 'DANGER'",
      [deviceId],
    );
    const events = await storage.execute<{ kind: string }>(
      'select e.kind from alarm_events e join alarms a on a.id = e.alarm_id where a.device_id = ? order by e.seq',
      [deviceId],
    );
    return { alarms, events: events.map((event) => event.kind) };
  };

  it('folds 1,000 danger poses of one upload into one alarm with 1,000 occurrences and one event; repeats only count', async () => {
    const { client } = await createUser(admin, 'user');
    const start = Date.now() - 60_000;
    const flood = presses('held-phone', 1000, start);
    expect((await client.post('/api/v1/realtime/positions', { poses: flood })).status).toBe(204);
    let seen = await alarmOf('held-phone');
    expect(seen.alarms).toHaveLength(1);
    expect(seen.alarms[0]).toMatchObject({ occurrences: 1000, x: flood[999]!.x });
    expect(seen.events).toEqual(['raised']);
    const stored = await running.gateway.services.storage.execute<{ n: string }>(
      "select count(*) as n from positions where device_id = 'held-phone'",
    );
    expect(Number(stored[0]!.n)).toBe(1000);

    // Held on: five more uploads within the debounce add their presses, and no event.
    for (let upload = 0; upload < 5; upload++) {
      expect(
        (await client.post('/api/v1/realtime/positions', { poses: presses('held-phone', 10, start + 1000 + upload * 10) })).status,
      ).toBe(204);
    }
    // The first upload resent as is (its answer lost): its presses are not counted again.
    expect((await client.post('/api/v1/realtime/positions', { poses: flood })).status).toBe(204);
    seen = await alarmOf('held-phone');
    expect(seen.alarms.map((alarm) => alarm.occurrences)).toEqual([1050]);
    // Where the latest repeat was pressed (x of its last pose), though no event was made of it.
    expect(seen.alarms[0]!.x).toBe(10 + 9);
    expect(seen.events).toEqual(['raised']);
  });

  it('counts raises against the credential budget: past it the upload is refused whole, repeats still count', async () => {
    const { client } = await createUser(admin, 'user');
    const now = Date.now() - 30_000;
    const devices = Array.from({ length: BUDGET }, (_, index) => `budget-${index}`);
    expect(
      (await client.post('/api/v1/realtime/positions', { poses: devices.flatMap((device, index) => presses(device, 3, now + index * 10)) }))
        .status,
    ).toBe(204);
    for (const device of devices) expect((await alarmOf(device)).alarms.map((alarm) => alarm.occurrences)).toEqual([3]);

    const refused = await client.post('/api/v1/realtime/positions', { poses: presses('budget-extra', 1, now + 500) });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ status: 429, code: 'rate_limited' });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await alarmOf('budget-extra')).alarms).toEqual([]);
    const positions = await running.gateway.services.storage.execute("select 1 from positions where device_id = 'budget-extra'");
    expect(positions).toEqual([]);

    // A repeat within the debounce costs no raise: it is stored and counted.
    expect((await client.post('/api/v1/realtime/positions', { poses: presses('budget-0', 2, now + 600) })).status).toBe(204);
    expect(await alarmOf('budget-0')).toMatchObject({ alarms: [{ occurrences: 5 }], events: ['raised'] });
  });

  it('raises again when the OPEN alarm was closed during the debounce', async () => {
    const { client } = await createUser(admin, 'user');
    const now = Date.now() - 20_000;
    expect((await client.post('/api/v1/realtime/positions', { poses: presses('closer', 2, now) })).status).toBe(204);
    const [first] = (await alarmOf('closer')).alarms;
    expect((await admin.patch(`/api/v1/alarms/${first!.id}`, { state: 'CLOSED', comment: 'handled on site' })).status).toBe(200);
    expect((await client.post('/api/v1/realtime/positions', { poses: presses('closer', 3, now + 100) })).status).toBe(204);
    const seen = await alarmOf('closer');
    expect(seen.alarms.map((alarm) => alarm.occurrences).sort()).toEqual([2, 3]);
    expect(seen.events).toEqual(['raised', 'state_changed', 'raised']);
  });
});
