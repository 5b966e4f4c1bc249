import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/** Review NH1: hand-raised alarms without a device are about their raiser, and never merge across people. */
describe(`hand-raised alarms of different people stay apart (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Awaited<ReturnType<typeof createVenue>>;

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Raisers venue');
  });
  afterAll(async () => {
    await running?.stop();
  });

  it("a second user's DANGER without a device is their own alarm; the first keeps its place and count", async () => {
    const a = await createUser(admin, 'user');
    const b = await createUser(admin, 'user');
    const raisedByA = await a.client.post('/api/v1/alarms', {
      type: 'DANGER',
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x: 12,
      y: 34,
    });
    expect(raisedByA.status, raisedByA.text).toBe(201);
    expect(raisedByA.body).toMatchObject({
      user_id: a.user.id,
      occurrences: 1,
      position: { floor_id: venue.floors[0].id, cartesians: { x: 12, y: 34 } },
    });

    const raisedByB = await b.client.post('/api/v1/alarms', { type: 'DANGER' });
    expect(raisedByB.status, raisedByB.text).toBe(201);
    expect(raisedByB.body.id).not.toBe(raisedByA.body.id);
    expect(raisedByB.body).toMatchObject({ user_id: b.user.id, occurrences: 1, position: null });

    // B raises again, with a place: B's own alarm is the one updated, and only B's is answered.
    const repeatedByB = await b.client.post('/api/v1/alarms', {
      type: 'DANGER',
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x: 90,
      y: 5,
    });
    expect(repeatedByB.status, repeatedByB.text).toBe(200);
    expect(repeatedByB.body).toMatchObject({
      id: raisedByB.body.id,
      user_id: b.user.id,
      occurrences: 2,
      position: { cartesians: { x: 90, y: 5 } },
    });

    const aNow = await admin.get(`/api/v1/alarms/${raisedByA.body.id}`);
    expect(aNow.body).toMatchObject({
      state: 'OPEN',
      user_id: a.user.id,
      occurrences: 1,
      position: { floor_id: venue.floors[0].id, cartesians: { x: 12, y: 34 } },
    });

    const listedForB = await b.client.get('/api/v1/alarms');
    expect(listedForB.status).toBe(200);
    expect(listedForB.body.data.map((alarm: { id: string }) => alarm.id)).toEqual([raisedByB.body.id]);
    const listedForA = await a.client.get('/api/v1/alarms');
    expect(listedForA.body.data.map((alarm: { id: string }) => alarm.id)).toEqual([raisedByA.body.id]);

    const open = await running.gateway.services.storage.execute<{ user_id: string }>(
      "select user_id from alarms where type = 'DANGER' and state = 'OPEN' and device_id is null order by created_at",
    );
    expect(open.map((row) => row.user_id)).toEqual([a.user.id, b.user.id]);
  });

  it("one person's repeats still fold into their one OPEN alarm", async () => {
    const c = await createUser(admin, 'user');
    const first = await c.client.post('/api/v1/alarms', { type: 'ASSISTANCE_REQUEST' });
    const again = await c.client.post('/api/v1/alarms', { type: 'ASSISTANCE_REQUEST', comment: 'still here' });
    expect([first.status, again.status]).toEqual([201, 200]);
    expect(again.body).toMatchObject({ id: first.body.id, user_id: c.user.id, occurrences: 2 });
  });
});
