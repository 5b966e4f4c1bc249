import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PositionStore } from '../../shared/positions/position-store.js';
import { expireAll, retentionMaxima } from '../../shared/privacy/retention.js';
import { startReportMaterializer } from '../../shared/reports/materializations.js';
import type { ReportMaterializer } from '../../shared/reports/materializer.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createOrganization, createUser } from '../../testkit/identity.js';
import { outdoorRecord } from '../../testkit/positions.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const DAY = 86_400_000;
/** Five days ago, on the hour: older than organization A's 2 days, younger than the deployment's 30. */
const OLD = Math.floor((Date.now() - 5 * DAY) / 3_600_000) * 3_600_000;
/** An hour ago: kept everywhere. */
const RECENT = Math.floor((Date.now() - 3_600_000) / 3_600_000) * 3_600_000;
const SHORT = { positions: 2, zone_events: 2, stays_and_rollups: 2, alarm_positions: 2, audit: 2 };
const TABLES = [
  { table: 'positions', time: 'ts' },
  { table: 'zone_events', time: 'at' },
  { table: 'geofence_stays', time: 'hour' },
  { table: 'rollup_runs', time: 'quarter' },
  { table: 'rollup_heat_cells', time: 'hour' },
  { table: 'audit_log', time: 'at' },
];

describe(`privacy: retention per organization (${driverLabel})`, () => {
  let running: RunningGateway;
  let materializer: ReportMaterializer | undefined;
  const sql = <T = Record<string, unknown>>(text: string, params: unknown[] = []) =>
    running.gateway.services.storage.execute<T>(text, params);

  /** An organization with a fence, one person walking in and out of it long ago and lately, and a closed DANGER of long ago. */
  const seed = async (client: TestClient) => {
    const venue = await createVenue(client, `Retention venue ${randomUUID().slice(0, 6)}`);
    const fence = await client.post('/api/v1/geofences', {
      name: 'Store',
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      type: 'POLYGON',
      cartesians: squareCartesians(10, 10, 10),
    });
    expect(fence.status, fence.text).toBe(201);
    const person = await createUser(client, 'user');
    const device = `ret-${randomUUID().slice(0, 8)}`;
    const pose = (timestamp: number, x: number, extra: object = {}) => ({
      device_id: device,
      user_id: person.user.id,
      timestamp,
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x,
      y: 15,
      ...extra,
    });
    const walk = (start: number) => [0, 5, 10, 15, 20].map((second, index) => pose(start + second * 1000, index % 2 ? 15 : 2));
    for (const poses of [walk(OLD), [pose(OLD + 60_000, 4, { danger: true })], walk(RECENT)]) {
      const upload = await client.post('/api/v1/realtime/positions', { poses });
      expect(upload.status, upload.text).toBe(204);
    }
    const [{ organization_id: organizationId }] = await sql<{ organization_id: string }>('select organization_id from users where id = ?', [
      person.user.id,
    ]);
    let alarmId: string | undefined;
    await waitFor(async () => {
      [{ id: alarmId } = { id: undefined }] = await sql<{ id: string }>(`select id from alarms where device_id = ? and type = 'DANGER'`, [
        device,
      ]);
      return alarmId !== undefined;
    }, 'the DANGER alarm');
    const closed = await client.patch(`/api/v1/alarms/${alarmId}`, { state: 'CLOSED', comment: 'drill' });
    expect(closed.status, closed.text).toBe(200);
    // Raised five days ago, as its press was (an alarm's age is its raise's), and some of the audit entries too.
    await sql('update alarms set created_at = ? where id = ?', [new Date(OLD + 60_000), alarmId]);
    await sql(
      `update audit_log set at = ? where organization_id = ? and id in (select id from audit_log where organization_id = ? order by id limit 3)`,
      [new Date(OLD), organizationId, organizationId],
    );
    await waitFor(async () => {
      const counts = await Promise.all(TABLES.map(({ table, time }) => rowsOf(organizationId, table, time, 'old')));
      return counts.every((count) => count > 0);
    }, 'zone events, stays and rollups of long ago');
    return { organizationId, alarmId: alarmId!, person };
  };
  const waitFor = async (check: () => Promise<boolean>, what: string) => {
    for (let attempt = 0; attempt < 300; attempt++) {
      if (await check()) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`timed out waiting for ${what}`);
  };
  /** Rows of an organization in `table` older than two days, or younger. */
  const rowsOf = async (organizationId: string, table: string, time: string, age: 'old' | 'recent') => {
    const [row] = await sql<{ n: number }>(
      `select count(*)::int as n from ${table} where organization_id = ? and ${time} ${age === 'old' ? '<' : '>='} ?`,
      [organizationId, new Date(Date.now() - 2 * DAY)],
    );
    return row!.n;
  };

  beforeAll(async () => {
    running = await startTestGateway({
      POSITIONS_RETENTION_DAYS: '30',
      REPORTS_MATERIALIZE_INTERVAL_MS: '100',
      REPORTS_MATERIALIZE_LAG_MS: '2000',
    });
    const { services } = running.gateway;
    if (services.jobs.kind === 'bullmq') materializer = startReportMaterializer(services.storage, services.config, services.logger);
  });
  afterAll(async () => {
    await materializer?.stop();
    await running?.stop();
  });

  it("refuses a period past the deployment's maximum with 422 naming the field, and audits a change", async () => {
    const admin = await adminClient(running.client);
    const read = await admin.get('/api/v1/organizations/current_organization/privacy_settings');
    expect(read.status, read.text).toBe(200);
    expect(read.body.retention_max_days).toEqual({ positions: 30, zone_events: 30, stays_and_rollups: 30, alarm_positions: 30, audit: 30 });
    expect(read.body.retention_days).toEqual({
      positions: null,
      zone_events: null,
      stays_and_rollups: null,
      alarm_positions: null,
      audit: null,
    });
    const tooLong = await admin.put('/api/v1/organizations/current_organization/privacy_settings', {
      retention_days: { positions: 31, zone_events: 30, audit: 400 },
    });
    expect(tooLong.status, tooLong.text).toBe(422);
    expect(tooLong.body.errors.map((error: { field: string }) => error.field)).toEqual([
      'retention_days.positions',
      'retention_days.audit',
    ]);
    const zero = await admin.put('/api/v1/organizations/current_organization/privacy_settings', { retention_days: { positions: 0 } });
    expect(zero.status, zero.text).toBe(422);
    const unknown = await admin.put('/api/v1/organizations/current_organization/privacy_settings', { retention_days: { photos: 3 } });
    expect(unknown.status, unknown.text).toBe(422);
    // Nothing of the refused writes was stored.
    expect((await admin.get('/api/v1/organizations/current_organization/privacy_settings')).body.retention_days.positions).toBeNull();
    const set = await admin.put('/api/v1/organizations/current_organization/privacy_settings', { retention_days: { zone_events: 7 } });
    expect(set.status, set.text).toBe(200);
    expect(set.body.retention_days).toMatchObject({ zone_events: 7, positions: null });
    const manager = await createUser(admin, 'user_manager');
    expect(
      (await manager.client.put('/api/v1/organizations/current_organization/privacy_settings', { retention_days: { positions: 1 } }))
        .status,
    ).toBe(403);
    const audit = await admin.get('/api/v1/audit?object_type=privacy_settings');
    expect(audit.status, audit.text).toBe(200);
    const entry = audit.body.data.find(
      (row: { after: { retention_days?: { zone_events?: number } } }) => row.after?.retention_days?.zone_events === 7,
    );
    expect(entry?.before.retention_days.zone_events).toBeNull();
    const back = await admin.put('/api/v1/organizations/current_organization/privacy_settings', { retention_days: { zone_events: null } });
    expect(back.body.retention_days.zone_events).toBeNull();
  });

  it("expires an organization's data past its own periods in bounded batches, and keeps another organization's", async () => {
    const platform = await adminClient(running.client);
    const other = await createOrganization(platform);
    const a = await seed(platform);
    const b = await seed(other.client);
    const set = await platform.put('/api/v1/organizations/current_organization/privacy_settings', { retention_days: SHORT });
    expect(set.status, set.text).toBe(200);
    const before = await Promise.all(TABLES.map(({ table, time }) => rowsOf(b.organizationId, table, time, 'old')));
    const recentA = await Promise.all(TABLES.map(({ table, time }) => rowsOf(a.organizationId, table, time, 'recent')));

    // Batches of 2 rows: every kind has more than that to go, so each is deleted over several statements.
    const expired = await expireAll(running.gateway.services.storage, retentionMaxima(running.gateway.services.config), Date.now(), 2);
    expect(expired.get(a.organizationId)).toMatchObject({ positions: 6, alarm_positions: 1 });
    expect(expired.has(b.organizationId)).toBe(false);

    for (const { table, time } of TABLES)
      expect({ table, old: await rowsOf(a.organizationId, table, time, 'old') }).toEqual({ table, old: 0 });
    // What is younger than the period stays, and the other organization keeps everything (its maximum is 30 days).
    expect(await Promise.all(TABLES.map(({ table, time }) => rowsOf(a.organizationId, table, time, 'recent')))).toEqual(
      recentA.map((count, index) => (TABLES[index]!.table === 'audit_log' ? expect.any(Number) : count)),
    );
    expect(await Promise.all(TABLES.map(({ table, time }) => rowsOf(b.organizationId, table, time, 'old')))).toEqual(before);
    // The closed alarm stays, without its place, in the alarm and in its history; the other organization's keeps it.
    const alarmOf = async (id: string) =>
      (
        await sql<{
          state: string;
          user_id: string | null;
          floor_id: number | null;
          x: number | null;
          lat: number | null;
          positions: number;
        }>(
          `select state, user_id, floor_id, x, lat,
             (select count(*)::int from alarm_events e where e.alarm_id = a.id and e.alarm->'position' is not null and e.alarm->>'position' <> 'null') as positions
           from alarms a where id = ?`,
          [id],
        )
      )[0];
    expect(await alarmOf(a.alarmId)).toEqual({
      state: 'CLOSED',
      user_id: a.person.user.id,
      floor_id: null,
      x: null,
      lat: null,
      positions: 0,
    });
    expect(await alarmOf(b.alarmId)).toMatchObject({ state: 'CLOSED', user_id: b.person.user.id, x: 4 });
    expect((await alarmOf(b.alarmId))!.positions).toBeGreaterThan(0);

    // Each person reads the periods that apply to them.
    const keptOf = async (client: TestClient) => {
      const privacy = await client.get('/api/v1/users/me/privacy');
      expect(privacy.status, privacy.text).toBe(200);
      return Object.fromEntries(
        privacy.body.kept.map((entry: { data: string; retention_days: number | null }) => [entry.data, entry.retention_days]),
      );
    };
    expect(await keptOf(a.person.client)).toEqual({ ...SHORT, alarms: null });
    expect(await keptOf(b.person.client)).toEqual({
      positions: 30,
      zone_events: 30,
      stays_and_rollups: 30,
      alarm_positions: 30,
      audit: 30,
      alarms: null,
    });
    // A second pass finds nothing more.
    expect((await expireAll(running.gateway.services.storage, retentionMaxima(running.gateway.services.config), Date.now(), 2)).size).toBe(
      0,
    );
  });
  it('expires positions partition by partition: exactly the rows before the cutoff of the organization that keeps them less', async () => {
    const platform = await adminClient(running.client);
    const short = await createOrganization(platform);
    const long = await createOrganization(platform);
    const set = await short.client.put('/api/v1/organizations/current_organization/privacy_settings', { retention_days: { positions: 3 } });
    expect(set.status, set.text).toBe(200);
    const now = Date.now();
    const cutoff = now - 3 * DAY;
    const today = Math.floor(now / DAY) * DAY;
    // Both organizations the same positions: the first and last millisecond and the noon of each of the six days
    // before today (each boundary between two of them is a partition boundary), and around the cutoff, which falls
    // inside a day partition that keeps its later rows.
    const times = [-6, -5, -4, -3, -2, -1].flatMap((days) => [
      today + days * DAY,
      today + days * DAY + DAY / 2,
      today + (days + 1) * DAY - 1,
    ]);
    times.push(cutoff - 1, cutoff, cutoff + 1);
    times.sort((x, y) => x - y);
    const ids = [short.organization.id as string, long.organization.id as string];
    await new PositionStore(running.gateway.services.storage).insert(
      ids.flatMap((organizationId) => times.map((timestamp) => outdoorRecord({ organizationId, deviceId: 'partitioned', timestamp }))),
    );
    const timesOf = async (organizationId: string) =>
      (await sql<{ ts: string | Date }>('select ts from positions where organization_id = ? order by ts', [organizationId])).map((row) =>
        new Date(row.ts).getTime(),
      );
    expect(await timesOf(ids[0]!)).toEqual(times);

    // Every statement of the pass, as issued.
    const statements: { text: string; params: readonly unknown[] }[] = [];
    const storage = running.gateway.services.storage;
    const recording = {
      execute: <T>(text: string, params: readonly unknown[] = []) => {
        statements.push({ text, params });
        return storage.execute<T>(text, params);
      },
      kind: storage.kind,
    };
    const expired = await expireAll(recording, retentionMaxima(running.gateway.services.config), now, 2);

    const older = times.filter((time) => time < cutoff);
    expect(expired.get(ids[0]!)).toMatchObject({ positions: older.length });
    expect(expired.has(ids[1]!)).toBe(false);
    expect(await timesOf(ids[0]!)).toEqual(times.filter((time) => time >= cutoff));
    expect(await timesOf(ids[1]!)).toEqual(times);

    // Each delete of positions names one day partition, never the parent; together they are the days before the
    // cutoff's end, and none of a day that starts at or after it.
    const deletes = statements.filter((entry) => /delete from positions/.test(entry.text) && entry.params[0] === ids[0]);
    expect(deletes.length).toBeGreaterThan(0);
    for (const entry of deletes) expect(entry.text).not.toMatch(/\bpositions\b/);
    const named = new Set(deletes.map((entry) => /delete from (positions_p\d{8}) /.exec(entry.text)?.[1]));
    const dayName = (day: number) => `positions_p${new Date(day).toISOString().slice(0, 10).replace(/-/g, '')}`;
    for (const time of older) expect(named).toContain(dayName(Math.floor(time / DAY) * DAY));
    for (const name of named) expect(name! <= dayName(cutoff)).toBe(true);
    // And the plan of each reads that partition alone.
    for (const entry of new Map(deletes.map((entry) => [entry.text, entry])).values()) {
      const plan = (await sql<Record<string, string>>(`explain ${entry.text}`, [...entry.params]))
        .map((row) => Object.values(row)[0])
        .join('\n');
      expect(new Set(plan.match(/positions_p\d{8}/g))).toEqual(new Set([/delete from (positions_p\d{8}) /.exec(entry.text)?.[1]]));
    }
  });
});
