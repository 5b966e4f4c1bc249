import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import { EventTimeVenue } from '../../testkit/event-time.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, login } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Issue 30: a DEADMAN raised for silence is not withdrawn by the fixes the device buffered meanwhile, but it gets
 * them as evidence (silence_evidence: "reported late: was moving"), pushed and stored, whatever order they came in.
 */
describe(`event time: late fixes are evidence on a silence DEADMAN (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let control: TestSocket;
  let venue: EventTimeVenue;

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    const created = await createVenue(admin, 'Silence evidence venue');
    venue = new EventTimeVenue(running, admin, created.building.id, created.floors[0].id);
    const settings = { deadman_silence_s: 1, deadman_radius_m: 3 };
    expect((await admin.put(`/api/v1/buildings/${venue.buildingId}/alarm_settings`, settings)).status).toBe(200);
    const token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    control = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    expect((await control.request({ op: 'subscribe', topics: ['organization/alarms'] })).op).toBe('subscribed');
  });
  afterAll(async () => {
    control?.close();
    await running?.stop();
  });

  const frame = (deviceId: string, test: (data: any) => boolean) =>
    control.next((f) => f.op === 'alarm' && f.data.type === 'DEADMAN' && f.data.device_id === deviceId && test(f.data), 20_000);

  /** A device reports once and goes silent until its DEADMAN is raised; then enough time passes for its buffer to be late. */
  async function silenced(deviceId: string): Promise<{ id: string; since: number }> {
    await venue.upload([venue.pose(deviceId, Date.now(), 10, 20)]);
    const raised = await frame(deviceId, (data) => data.event === 'raised');
    expect(raised.data).toMatchObject({ state: 'OPEN', silence_evidence: null, details: { reason: 'silence' } });
    const since = Date.parse(raised.data.details.since);
    // Fixes taken in the first 1.5 s of the silence reach us over 2 s (the reorder window) after they were taken.
    while (Date.now() < since + 4000) await sleep(100);
    return { id: raised.data.id, since };
  }

  it('gives the alarm the buffered fixes that cover its silence when they come after the live fix; it stays OPEN', async () => {
    const { id, since } = await silenced('walker');
    await venue.upload([venue.pose('walker', Date.now(), 40, 20)]);
    await frame('walker', (data) => data.contact_restored_at !== null);
    // The buffer, newest first: the worker walked 20 m while we heard nothing.
    await venue.upload([
      venue.pose('walker', since + 1500, 30, 20),
      venue.pose('walker', since + 1000, 20, 20),
      venue.pose('walker', since + 500, 10, 20),
    ]);
    const updated = await frame('walker', (data) => data.silence_evidence !== null);
    const evidence = {
      count: 3,
      first_at: new Date(since + 500).toISOString(),
      last_at: new Date(since + 1500).toISOString(),
      was_moving: true,
      moved_m: 20,
    };
    expect(updated.data).toMatchObject({ id, state: 'OPEN', silence_evidence: evidence, details: { silence_evidence: evidence } });
    expect(updated.data.silence_evidence.fixes.map((fix: any) => [fix.at, fix.x])).toEqual([
      [new Date(since + 500).toISOString(), 10],
      [new Date(since + 1000).toISOString(), 20],
      [new Date(since + 1500).toISOString(), 30],
    ]);
    for (const fix of updated.data.silence_evidence.fixes) expect(fix.delay_ms).toBeGreaterThan(2000);

    const stored = await admin.get(`/api/v1/alarms/${id}`);
    expect(stored.status).toBe(200);
    expect(stored.body).toMatchObject({ state: 'OPEN', silence_evidence: evidence });
    expect(stored.body.silence_evidence).toEqual(updated.data.silence_evidence);

    // The same fix again (an app resending its buffer) adds nothing: the evidence stands as it was. (The alarm's seq
    // may move on: silent again after its live fix, the device's next DEADMAN folds into this OPEN alarm.)
    await venue.upload([venue.pose('walker', since + 1000, 20, 20)]);
    await venue.settle();
    const again = await admin.get(`/api/v1/alarms/${id}`);
    expect(again.body.silence_evidence).toEqual(stored.body.silence_evidence);
    expect(
      control.frames.filter(
        (f) => f.op === 'alarm' && f.data.id === id && f.data.silence_evidence?.count !== undefined && f.data.silence_evidence.count !== 3,
      ),
    ).toEqual([]);
  });

  it('gives it the same evidence when the buffer comes first, oldest first, in chunks; a device that lay still was not moving', async () => {
    const { id, since } = await silenced('lying');
    await venue.upload([venue.pose('lying', since + 500, 10, 20)]);
    await venue.upload([venue.pose('lying', since + 1000, 11, 20), venue.pose('lying', since + 1500, 10, 21)]);
    await venue.upload([venue.pose('lying', Date.now(), 10, 20)]);
    await venue.settle();
    const stored = await admin.get(`/api/v1/alarms/${id}`);
    expect(stored.body).toMatchObject({
      state: 'OPEN',
      silence_evidence: {
        count: 3,
        first_at: new Date(since + 500).toISOString(),
        last_at: new Date(since + 1500).toISOString(),
        was_moving: false,
        moved_m: 1.41,
      },
    });
    // The live fix that restored contact is no evidence: it reached us on time.
    expect(stored.body.silence_evidence.fixes).toHaveLength(3);
  });

  it('lists the evidence with the alarm', async () => {
    const listed = await admin.get('/api/v1/alarms?type=DEADMAN');
    expect(listed.status).toBe(200);
    const walker = listed.body.data.find((alarm: any) => alarm.device_id === 'walker');
    expect(walker.silence_evidence).toMatchObject({ count: 3, was_moving: true });
  });
});
