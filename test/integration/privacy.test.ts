import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { positionsOutsideWindow } from '../../shared/metrics/metrics.js';
import { startReportMaterializer } from '../../shared/reports/materializations.js';
import type { ReportMaterializer } from '../../shared/reports/materializer.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const HOUR = 3_600_000;
/** Yesterday's UTC midnight: every instant of the tests is past, and within POSITIONS_MAX_AGE. */
const DAY0 = Math.floor(Date.now() / 86_400_000) * 86_400_000 - 86_400_000;
const at = (hours: number, seconds = 0) => DAY0 + hours * HOUR + seconds * 1000;
/** Tracked from 00:00 to 12:00 UTC, every day. */
const MORNINGS = {
  time_zone: 'UTC',
  weekly: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((day) => ({ day, from: '00:00', to: '12:00' })),
};

type Venue = Awaited<ReturnType<typeof createVenue>>;
const outsideCount = async () => (await positionsOutsideWindow.get()).values[0]?.value ?? 0;

describe(`privacy: tracking windows and erasure (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Venue;
  let materializer: ReportMaterializer | undefined;
  const pose = (deviceId: string, userId: string, timestamp: number, x: number, extra: object = {}) => ({
    device_id: deviceId,
    user_id: userId,
    timestamp,
    building_id: venue.building.id,
    floor_id: venue.floors[0].id,
    x,
    y: 15,
    ...extra,
  });
  const upload = async (poses: object[]) => {
    const response = await admin.post('/api/v1/realtime/positions', { poses });
    expect(response.status, response.text).toBe(204);
  };
  const history = async (deviceId: string) => {
    const window = `from_date=${new Date(DAY0).toISOString()}&to_date=${new Date(DAY0 + 86_400_000).toISOString()}`;
    const response = await admin.get(`/api/v1/reports/raw_data.json?${window}&device_ids=${deviceId}`);
    expect(response.status, response.text).toBe(200);
    return response.body.data.map((row: { x: number }) => row.x);
  };
  const live = async (deviceId: string) => {
    const response = await admin.get(`/api/v1/realtime/positions?device_ids=${deviceId}`);
    expect(response.status, response.text).toBe(200);
    return response.body.features.map((feature: { properties: { x?: number } }) => feature.properties);
  };
  const sql = <T = Record<string, unknown>>(text: string, params: unknown[] = []) =>
    running.gateway.services.storage.execute<T>(text, params);

  beforeAll(async () => {
    // The lag covers a position's way from arrival (its received_at) to its commit: with none, a pass can move the
    // materializer's watermark past positions still being committed, which it then never builds.
    running = await startTestGateway({ REPORTS_MATERIALIZE_INTERVAL_MS: '100', REPORTS_MATERIALIZE_LAG_MS: '2000' });
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Privacy venue');
    // With Redis the workers keep the rollups and stays (workers/main.ts): run their materializer as they would.
    const { services } = running.gateway;
    if (services.jobs.kind === 'bullmq') materializer = startReportMaterializer(services.storage, services.config, services.logger);
  });
  afterAll(async () => {
    await materializer?.stop();
    await running?.stop();
  });

  describe('tracking windows', () => {
    it('acknowledges positions outside the window but stores, pushes and reports none of them', async () => {
      const worker = await createUser(admin, 'user');
      const device = `win-${randomUUID().slice(0, 8)}`;
      const put = await admin.put(`/api/v1/users/${worker.user.id}/tracking_window`, MORNINGS);
      expect(put.status, put.text).toBe(200);
      expect(put.body.schedule).toEqual({ ...MORNINGS, exceptions: [] });
      expect((await admin.get(`/api/v1/users/${worker.user.id}/tracking_window`)).body.schedule).toEqual({ ...MORNINGS, exceptions: [] });
      const before = await outsideCount();
      await upload([
        pose(device, worker.user.id, at(9), 1),
        pose(device, worker.user.id, at(13), 2),
        pose(device, worker.user.id, at(18), 3),
      ]);
      expect(await outsideCount()).toBe(before + 2);
      expect(await history(device)).toEqual([1]);
      // Live shows the last tracked position, never the later ones taken off hours.
      expect((await live(device)).map((properties: { timestamp?: unknown }) => properties)).toHaveLength(1);
      expect(JSON.stringify(await live(device))).toContain(new Date(at(9)).toISOString().slice(0, 16));
      const [row] = await sql<{ n: number }>('select count(*)::int as n from positions where device_id = ?', [device]);
      expect(row!.n).toBe(1);
    });

    it('raises a DANGER pressed outside the window, with its place, and keeps that position', async () => {
      const worker = await createUser(admin, 'user');
      const device = `danger-${randomUUID().slice(0, 8)}`;
      expect((await admin.put(`/api/v1/users/${worker.user.id}/tracking_window`, MORNINGS)).status).toBe(200);
      await upload([pose(device, worker.user.id, at(20), 4), pose(device, worker.user.id, at(20, 5), 5, { danger: true })]);
      const alarms = await admin.get(`/api/v1/alarms?device_ids=${device}`);
      expect(alarms.status, alarms.text).toBe(200);
      const danger = (alarms.body.items ?? alarms.body.data ?? alarms.body).filter(
        (alarm: { type: string; device_id: string }) => alarm.type === 'DANGER' && alarm.device_id === device,
      );
      expect(danger).toHaveLength(1);
      expect(danger[0].user_id).toBe(worker.user.id);
      expect(danger[0].position.cartesians).toEqual({ x: 5, y: 15 });
      expect(await history(device)).toEqual([5]);
    });

    it('says who is tracked now: on the live views per person, and to each person at /users/me/privacy', async () => {
      const never = { time_zone: 'UTC', weekly: [] };
      const always = { time_zone: 'UTC', weekly: MORNINGS.weekly.map((range) => ({ ...range, from: '00:00', to: '24:00' })) };
      const off = await createUser(admin, 'user');
      const on = await createUser(admin, 'user');
      const offDevice = `off-${randomUUID().slice(0, 8)}`;
      const onDevice = `on-${randomUUID().slice(0, 8)}`;
      expect((await admin.put(`/api/v1/users/${off.user.id}/tracking_window`, never)).status).toBe(200);
      expect((await admin.put(`/api/v1/users/${on.user.id}/tracking_window`, always)).status).toBe(200);
      // Off hours, only a DANGER is kept, and so it is the off-duty person's last live position.
      await upload([
        pose(offDevice, off.user.id, Date.now() - 1000, 1, { danger: true }),
        pose(onDevice, on.user.id, Date.now() - 1000, 2),
      ]);
      const trackedOf = (features: { tracked_now: boolean }[]) => features.map((properties) => properties.tracked_now);
      expect(trackedOf(await live(offDevice))).toEqual([false]);
      expect(trackedOf(await live(onDevice))).toEqual([true]);
      const building = await admin.get(`/api/v1/real_time/building/${venue.building.id}`);
      const inBuilding = new Map(
        building.body.features.map((feature: { id: string; properties: { tracked_now: boolean } }) => [
          feature.id,
          feature.properties.tracked_now,
        ]),
      );
      expect([inBuilding.get(offDevice), inBuilding.get(onDevice)]).toEqual([false, true]);
      expect((await off.client.get('/api/v1/users/me/privacy')).body.tracking_window).toMatchObject({ tracked_now: false, source: 'user' });
      expect((await on.client.get('/api/v1/users/me/privacy')).body.tracking_window).toMatchObject({
        tracked_now: true,
        tracked_always: false,
      });
    });

    it('takes writes of one window at once: every one answered 200, and one of them stored', async () => {
      const group = await admin.post('/api/v1/groups', { name: `Shared shift ${randomUUID().slice(0, 6)}` });
      expect(group.status, group.text).toBe(201);
      const windows = Array.from({ length: 6 }, (_, index) => ({
        time_zone: 'UTC',
        weekly: [{ day: 'mon', from: `0${index}:00`, to: '12:00' }],
      }));
      const answers = await Promise.all(windows.map((window) => admin.put(`/api/v1/groups/${group.body.id}/tracking_window`, window)));
      expect(answers.map((answer) => answer.status)).toEqual(windows.map(() => 200));
      const stored = (await admin.get(`/api/v1/groups/${group.body.id}/tracking_window`)).body.schedule;
      expect(windows.map((window) => ({ ...window, exceptions: [] }))).toContainEqual(stored);
    });

    it('applies a group’s window to its members, and a change at once (the cache is dropped)', async () => {
      const group = await admin.post('/api/v1/groups', { name: `Night shift ${randomUUID().slice(0, 6)}` });
      expect(group.status, group.text).toBe(201);
      const member = await createUser(admin, 'user', { groups: group.body.id });
      const device = `grp-${randomUUID().slice(0, 8)}`;
      await upload([pose(device, member.user.id, at(14), 1)]); // no window yet: tracked (and cached as such)
      expect((await admin.put(`/api/v1/groups/${group.body.id}/tracking_window`, MORNINGS)).status).toBe(200);
      await upload([pose(device, member.user.id, at(15), 2), pose(device, member.user.id, at(10), 3)]);
      expect(await history(device)).toEqual([3, 1]);
      const privacy = await member.client.get('/api/v1/users/me/privacy');
      expect(privacy.status, privacy.text).toBe(200);
      expect(privacy.body.tracking_window).toEqual({
        source: 'group',
        schedule: { ...MORNINGS, exceptions: [] },
        tracked_always: false,
        tracked_now: expect.any(Boolean),
      });
      expect(privacy.body.kept.find((entry: { data: string }) => entry.data === 'positions').retention_days).toBe(
        running.gateway.services.config.POSITIONS_RETENTION_DAYS,
      );
      // The member's own window wins; removing it, the group's applies again.
      expect((await admin.put(`/api/v1/users/${member.user.id}/tracking_window`, { time_zone: 'UTC', weekly: [] })).status).toBe(200);
      await upload([pose(device, member.user.id, at(11), 4)]);
      expect((await admin.delete(`/api/v1/users/${member.user.id}/tracking_window`)).status).toBe(204);
      await upload([pose(device, member.user.id, at(11, 30), 5)]);
      expect(await history(device)).toEqual([3, 5, 1]);
    });

    it('refuses an overlapping schedule or an unknown time zone with 422 naming the field, and other organizations’ users with 404', async () => {
      const worker = await createUser(admin, 'user');
      const overlap = await admin.put(`/api/v1/users/${worker.user.id}/tracking_window`, {
        time_zone: 'UTC',
        weekly: [
          { day: 'mon', from: '08:00', to: '12:00' },
          { day: 'mon', from: '11:00', to: '13:00' },
        ],
      });
      expect(overlap.status, overlap.text).toBe(422);
      expect(overlap.body.errors.map((error: { field: string }) => error.field)).toEqual(['weekly.1']);
      const zone = await admin.put(`/api/v1/users/${worker.user.id}/tracking_window`, { time_zone: 'Europe/Atlantis', weekly: [] });
      expect(zone.status).toBe(422);
      expect(zone.body.errors.map((error: { field: string }) => error.field)).toEqual(['time_zone']);
      expect((await admin.get(`/api/v1/users/${worker.user.id}/tracking_window`)).body.schedule).toBeNull();
      expect((await admin.get(`/api/v1/users/${randomUUID()}/tracking_window`)).status).toBe(404);
      expect((await worker.client.put(`/api/v1/users/${worker.user.id}/tracking_window`, MORNINGS)).status).toBe(403);
    });
  });

  describe('erasure', () => {
    /**
     * Tables a person's id may stay in after an erasure of their history, and why: their account and credentials
     * (erasure leaves the person employed; deleting the user removes those), their devices' assignment, what they
     * did (audit), their window, the erasure's own record, and a building's creator.
     */
    const KEPT = [
      'users',
      'devices',
      'api_keys',
      'refresh_tokens',
      'audit_log',
      'tracking_windows',
      'erasure_requests',
      'buildings',
      'mikro_orm_migrations',
    ];
    /** Every table of the schema with a column naming a user or a device: a new table is covered without editing this test. */
    const personTables = async () =>
      (
        await sql<{ table_name: string }>(
          `select distinct c.table_name from information_schema.columns c join information_schema.tables t using (table_schema, table_name)
         where c.table_schema = current_schema() and t.table_type = 'BASE TABLE' and (c.column_name like '%user_id%' or c.column_name like '%device_id%')`,
        )
      )
        .map((row) => row.table_name)
        .sort();
    /** Rows of `table` whose text (jsonb payloads included) holds any of `needles`. */
    const rowsHolding = async (table: string, needles: string[]) => {
      const [row] = await sql<{ n: number }>(
        `select count(*)::int as n from ${table} t where ${needles.map(() => 'strpos(t::text, ?) > 0').join(' or ')}`,
        needles,
      );
      return row!.n;
    };
    const waitFor = async (check: () => Promise<boolean>, what: string) => {
      for (let attempt = 0; attempt < 300; attempt++) {
        if (await check()) return;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw new Error(`timed out waiting for ${what}`);
    };
    const erase = async (userId: string, body: object = {}) => {
      const response = await admin.post(`/api/v1/users/${userId}/erasure`, body);
      expect(response.status, response.text).toBe(202);
      let state = response.body;
      await waitFor(async () => {
        state = (await admin.get(`/api/v1/users/${userId}/erasure/${response.body.id}`)).body;
        return state.status === 'done';
      }, 'the erasure');
      return state;
    };

    it('leaves no row of the person in any table that holds a user or device id; the alarm stays, pseudonymized', async () => {
      await admin.post('/api/v1/geofences', {
        name: 'Erasure fence',
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'POLYGON',
        cartesians: squareCartesians(10, 10, 10),
        max_stay_time: 8,
      });
      const victim = await createUser(admin, 'user');
      const bystander = await createUser(admin, 'user');
      const device = `victim-${randomUUID().slice(0, 8)}`;
      const other = `bystander-${randomUUID().slice(0, 8)}`;
      const assigned = await admin.post('/api/v1/devices', { identifier: device, user_id: victim.user.id });
      expect(assigned.status, assigned.text).toBe(201);
      // In and out of the fence (zone events, stays), over two hours (rollups), then a DANGER with its place.
      const walk = (deviceId: string, userId: string) =>
        [0, 5, 10, 15, 20, 3600, 3605].map((second, index) => pose(deviceId, userId, at(5, second), index % 2 ? 15 : 2));
      await upload([...walk(device, victim.user.id), ...walk(other, bystander.user.id)]);
      await upload([pose(device, victim.user.id, at(7), 4, { danger: true })]);
      // A stay past the fence's max stay: a GEOFENCE_MAX_STAY_TIME alarm, whose raise key names the device.
      await upload([0, 10, 20].map((second, index) => pose(device, victim.user.id, at(8, second), index < 2 ? 15 : 2)));
      // Both on the roll of an evacuation drill (a fix in the building just now), the victim marked safe by hand.
      const now = Date.now() - 5_000;
      await upload([pose(device, victim.user.id, now, 4), pose(other, bystander.user.id, now, 6)]);
      const evacuations = `/api/v1/buildings/${venue.building.id}/evacuations`;
      const declared = await admin.post(evacuations, { drill: true, note: 'Erasure drill' });
      expect(declared.status, declared.text).toBe(201);
      const victimEntry = encodeURIComponent(`user:${victim.user.id}`);
      const marked = await admin.post(`${evacuations}/${declared.body.id}/roll/${victimEntry}/safe`, { comment: 'seen outside' });
      expect(marked.status, marked.text).toBe(200);
      expect((await admin.post(`${evacuations}/${declared.body.id}/end`)).status).toBe(200);
      const rollBefore = (await admin.get(`${evacuations}/${declared.body.id}`)).body;
      const onRoll = (roll: { roll: { entry: string }[] }, userId: string) => roll.roll.find((entry) => entry.entry === `user:${userId}`);
      expect(onRoll(rollBefore, victim.user.id)).toMatchObject({ status: 'safe_manual' });
      expect(onRoll(rollBefore, bystander.user.id)).toBeDefined();
      const needles = [victim.user.id, device];
      await waitFor(
        async () =>
          (await rowsHolding('rollup_runs', needles)) > 0 &&
          (await rowsHolding('geofence_stays', needles)) > 0 &&
          (await rowsHolding('zone_events', needles)) > 0 &&
          (await rowsHolding('alarm_raise_keys', [`max-stay|${device}|`])) > 0,
        'rollups, stays, zone events and the max-stay alarm',
      );
      const tables = await personTables();
      expect(tables).toEqual(
        expect.arrayContaining([
          'positions',
          'zone_events',
          'geofence_stays',
          'rollup_runs',
          'rollup_heat_cells',
          'alarms',
          'evacuation_roll',
        ]),
      );
      // Beyond those columns, every other table is read whole as text too: jsonb payloads (alarm events, raise keys,
      // webhook deliveries, dead letters) name people and devices without a column of their own.
      const everyTable = (
        await sql<{ table_name: string }>(
          `select table_name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE'`,
        )
      ).map((row) => row.table_name);
      const checked = everyTable.filter((table) => !KEPT.includes(table));
      expect(checked).toEqual(
        expect.arrayContaining([...tables.filter((table) => !KEPT.includes(table)), 'alarm_events', 'alarm_raise_keys']),
      );
      const othersBefore = await Promise.all(checked.map((table) => rowsHolding(table, [bystander.user.id, other])));
      expect(othersBefore.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);

      const done = await erase(victim.user.id);
      expect(done.removed).toMatchObject({ positions: 12, alarms_pseudonymized: 2, roll_entries_pseudonymized: 1 });
      expect(done.removed.zone_events).toBeGreaterThan(0);
      expect(done.removed.rollup_runs).toBeGreaterThan(0);
      for (const table of checked) expect({ table, rows: await rowsHolding(table, needles) }).toEqual({ table, rows: 0 });
      // The bystander's rows are all still there.
      expect(await Promise.all(checked.map((table) => rowsHolding(table, [bystander.user.id, other])))).toEqual(othersBefore);
      const [alarm] = await sql<{ type: string; user_id: string | null; device_id: string; lat: number | null }>(
        `select type, user_id, device_id, lat from alarms where device_id like 'erased-%' and type = 'DANGER' order by created_at desc limit 1`,
      );
      expect(alarm).toMatchObject({ type: 'DANGER', user_id: null, lat: null });
      expect(await history(device)).toEqual([]);
      // The drill's record still counts them, safe by the warden's hand, under a pseudonym with no device or place.
      const rollAfter = (await admin.get(`${evacuations}/${declared.body.id}`)).body;
      expect(rollAfter.counts).toEqual(rollBefore.counts);
      const erased = rollAfter.roll.find((entry: { entry: string }) => entry.entry.startsWith('erased:'));
      expect(erased).toMatchObject({ status: 'safe_manual', user_id: null, device_ids: [], comment: 'seen outside' });
      expect(onRoll(rollAfter, victim.user.id)).toBeUndefined();
      expect(onRoll(rollAfter, bystander.user.id)).toEqual(onRoll(rollBefore, bystander.user.id));
      // Idempotent: again, nothing more to remove.
      const again = await erase(victim.user.id);
      expect(again.removed).toEqual({
        positions: 0,
        zone_events: 0,
        geofence_stays: 0,
        rollup_runs: 0,
        rollup_heat_cells: 0,
        alarms_pseudonymized: 0,
        roll_entries_pseudonymized: 0,
      });
      const audit = await admin.get('/api/v1/audit?object_type=erasures');
      expect(audit.status, audit.text).toBe(200);
      expect(JSON.stringify(audit.body)).toContain(done.id);
    });

    it('deleting a user erases them: no row of the person in any table that holds a user or device id, and the erasure is listed', async () => {
      const leaver = await createUser(admin, 'user');
      const bystander = await createUser(admin, 'user');
      const device = `leaver-${randomUUID().slice(0, 8)}`;
      const other = `stayer-${randomUUID().slice(0, 8)}`;
      expect((await admin.post('/api/v1/devices', { identifier: device, user_id: leaver.user.id })).status).toBe(201);
      expect((await admin.post('/api/v1/devices', { identifier: other, user_id: bystander.user.id })).status).toBe(201);
      expect((await admin.put(`/api/v1/users/${leaver.user.id}/tracking_window`, MORNINGS)).status).toBe(200);
      expect((await leaver.client.post('/api/v1/auth/apikeys', { permission: 'read-only', description: 'mine' })).status).toBe(201);
      const walk = (deviceId: string, userId: string) =>
        [0, 5, 10, 3600].map((second, index) => pose(deviceId, userId, at(8, second), index % 2 ? 15 : 2, { danger: second === 3600 }));
      await upload([...walk(device, leaver.user.id), ...walk(other, bystander.user.id)]);
      const needles = [leaver.user.id, device];
      await waitFor(
        async () => (await rowsHolding('rollup_runs', needles)) > 0 && (await rowsHolding('alarms', needles)) > 0,
        'rollups and the alarm',
      );
      // Only the erasure's own record, and the audit log (who did what, kept for its retention), may name them after.
      const kept = ['audit_log', 'erasure_requests', 'mikro_orm_migrations'];
      const everyTable = (
        await sql<{ table_name: string }>(
          `select table_name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE'`,
        )
      )
        .map((row) => row.table_name)
        .filter((table) => !kept.includes(table));
      expect(everyTable).toEqual(
        expect.arrayContaining([...(await personTables()).filter((table) => !kept.includes(table)), 'users', 'devices']),
      );
      const othersBefore = await Promise.all(everyTable.map((table) => rowsHolding(table, [bystander.user.id, other])));

      const deleted = await admin.delete(`/api/v1/users/${leaver.user.id}`);
      expect(deleted.status, deleted.text).toBe(204);
      let erasures = (await admin.get(`/api/v1/users/${leaver.user.id}/erasures`)).body;
      await waitFor(async () => {
        erasures = (await admin.get(`/api/v1/users/${leaver.user.id}/erasures`)).body;
        return erasures[0]?.status === 'done';
      }, 'the erasure the deletion started');
      expect(erasures).toHaveLength(1);
      expect(erasures[0]).toMatchObject({ cause: 'user_deleted', user_id: leaver.user.id, from: null, to: null });
      expect(erasures[0].removed).toMatchObject({ positions: 4, alarms_pseudonymized: 1 });
      for (const table of everyTable) expect({ table, rows: await rowsHolding(table, needles) }).toEqual({ table, rows: 0 });
      expect(await Promise.all(everyTable.map((table) => rowsHolding(table, [bystander.user.id, other])))).toEqual(othersBefore);
      expect((await admin.get(`/api/v1/users/${leaver.user.id}`)).status).toBe(404);
      expect((await leaver.client.get('/api/v1/users/me/privacy')).status).toBe(401);
      // The audit log says who deleted whom; the erasure's record says what went, never the data.
      const audit = await admin.get(`/api/v1/audit?object_type=users&object_id=${leaver.user.id}`);
      expect(audit.body.data.map((entry: { method: string }) => entry.method)).toContain('DELETE');
      expect((await bystander.client.get(`/api/v1/users/${leaver.user.id}/erasures`)).status).toBe(403);
    });

    it('erases only within from..to, refuses from after to (422 naming from), and is for admins only', async () => {
      const person = await createUser(admin, 'user');
      const device = `ranged-${randomUUID().slice(0, 8)}`;
      await upload([
        pose(device, person.user.id, at(1), 1),
        pose(device, person.user.id, at(3), 2),
        pose(device, person.user.id, at(6), 3),
      ]);
      const hours = async () =>
        (
          await sql<{ h: number }>('select distinct extract(hour from quarter)::int as h from rollup_runs where user_id = ? order by h', [
            person.user.id,
          ])
        ).map((row) => row.h);
      await waitFor(async () => (await hours()).length === 3, 'the rollups of three hours');
      const done = await erase(person.user.id, { from: new Date(at(2)).toISOString(), to: new Date(at(4)).toISOString() });
      expect(done.removed.positions).toBe(1);
      expect(await history(device)).toEqual([1, 3]);
      // Only the rollups of the range went: the buckets are quarter hours, not calendar quarters.
      expect(await hours()).toEqual([1, 6]);
      const backwards = await admin.post(`/api/v1/users/${person.user.id}/erasure`, {
        from: new Date(at(4)).toISOString(),
        to: new Date(at(2)).toISOString(),
      });
      expect(backwards.status).toBe(422);
      expect(backwards.body.errors.map((error: { field: string }) => error.field)).toEqual(['from']);
      const manager = await createUser(admin, 'user_manager');
      expect((await manager.client.post(`/api/v1/users/${person.user.id}/erasure`, {})).status).toBe(403);
      expect((await admin.post(`/api/v1/users/${randomUUID()}/erasure`, {})).status).toBe(404);
    });

    it('erases a range across day partitions: each day’s rows within it, none outside it, none of another person', async () => {
      const person = await createUser(admin, 'user');
      const bystander = await createUser(admin, 'user');
      const device = `days-${randomUUID().slice(0, 8)}`;
      const others = `days-other-${randomUUID().slice(0, 8)}`;
      // Three days (three partitions): the range runs from the evening of the first into the morning of the second.
      const instants = [at(-30), at(-4), at(-2, 1), at(-1), at(1), at(3), at(10), at(20)];
      await upload(instants.map((instant, index) => pose(device, person.user.id, instant, index)));
      await upload(instants.map((instant, index) => pose(others, bystander.user.id, instant, index)));
      const done = await erase(person.user.id, { from: new Date(at(-3)).toISOString(), to: new Date(at(2)).toISOString() });
      expect(done.removed.positions).toBe(3);
      const left = async (deviceId: string) =>
        (await sql<{ x: number }>('select x from positions where device_id = ? order by ts', [deviceId])).map((row) => Number(row.x));
      expect(await left(device)).toEqual([0, 1, 5, 6, 7]);
      expect(await left(others)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    });

    it('finds positions of a device nothing else knows of (the pass in physical order), among other people’s', async () => {
      const person = await createUser(admin, 'user');
      const bystander = await createUser(admin, 'user');
      await upload([pose(`seed-${randomUUID().slice(0, 8)}`, bystander.user.id, at(4), 1)]); // the day's partition
      const [{ organization_id: organizationId }] = await sql<{ organization_id: string }>(
        'select organization_id from users where id = ?',
        [person.user.id],
      );
      // Received long ago, so no rollup names the device; unassigned, so no device row does; no zone event either.
      const insert = (userId: string, device: string, count: number) =>
        sql(
          `insert into positions (organization_id, device_id, user_id, building_id, floor_id, indoor, x, y, lat, lng, yaw, accuracy, ts, received_at)
           select ?, ?, ?, ?, ?, true, 1, 1, 40.4, -3.7, 0, 1, ?::timestamptz + g * interval '1 second', now() - interval '2 days'
           from generate_series(1, ?::int) g`,
          [organizationId, device, userId, venue.building.id, venue.floors[0].id, new Date(at(4)), count],
        );
      const hidden = `hidden-${randomUUID().slice(0, 8)}`;
      const others = `others-${randomUUID().slice(0, 8)}`;
      await insert(person.user.id, hidden, 1200);
      await insert(bystander.user.id, others, 1500);
      const done = await erase(person.user.id);
      expect(done.removed.positions).toBe(1200);
      const count = async (device: string) =>
        (await sql<{ n: number }>('select count(*)::int as n from positions where device_id = ?', [device]))[0]!.n;
      expect([await count(hidden), await count(others)]).toEqual([0, 1500]);
    });

    it('carries on after a restart with an erasure the stop interrupted', async () => {
      const person = await createUser(admin, 'user');
      const device = `resumed-${randomUUID().slice(0, 8)}`;
      await upload([pose(device, person.user.id, at(2), 1), pose(device, person.user.id, at(3), 2)]);
      // As a stop mid-run leaves it: running, one table done, nothing queued any more.
      const id = randomUUID();
      const [{ organization_id: organizationId }] = await sql<{ organization_id: string }>(
        'select organization_id from users where id = ?',
        [person.user.id],
      );
      await sql(
        `insert into erasure_requests (id, organization_id, user_id, status, removed) values (?, ?, ?, 'running', '{"positions": 0}')`,
        [id, organizationId, person.user.id],
      );
      await materializer?.stop();
      running = await running.restart();
      admin = await adminClient(running.client);
      const { services } = running.gateway;
      if (services.jobs.kind === 'bullmq') materializer = startReportMaterializer(services.storage, services.config, services.logger);
      await waitFor(
        async () => (await admin.get(`/api/v1/users/${person.user.id}/erasure/${id}`)).body.status === 'done',
        'the resumed erasure',
      );
      expect((await admin.get(`/api/v1/users/${person.user.id}/erasure/${id}`)).body.removed.positions).toBe(2);
      expect(await history(device)).toEqual([]);
    });
  });
});
