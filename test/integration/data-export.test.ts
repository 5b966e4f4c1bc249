import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { bullConnection, bullPrefix, JOBS_QUEUE_NAME } from '../../shared/jobs/bullmq-job-queue.js';
import { DATA_EXPORT_JOB, runDataExport } from '../../shared/privacy/data-export.js';
import { readZip } from '../../shared/privacy/zip.js';
import { redisConnections } from '../../shared/redis/redis-connections.js';
import { startReportMaterializer } from '../../shared/reports/materializations.js';
import type { ReportMaterializer } from '../../shared/reports/materializer.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, adminClient, createOrganization, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const HOUR = 3_600_000;
/** Yesterday's UTC midnight: every instant is past, and within POSITIONS_MAX_AGE. */
const DAY0 = Math.floor(Date.now() / 86_400_000) * 86_400_000 - 86_400_000;
const at = (hours: number, seconds = 0) => DAY0 + hours * HOUR + seconds * 1000;

type Person = Awaited<ReturnType<typeof createUser>> & { device: string };
type Rows = Record<string, unknown>[];

describe(`privacy: a person's data export (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let materializer: ReportMaterializer | undefined;
  let person: Person;
  let bystander: Person;
  const sql = <T = Record<string, unknown>>(text: string, params: unknown[] = []) =>
    running.gateway.services.storage.execute<T>(text, params);
  const waitFor = async (check: () => Promise<boolean>, what: string) => {
    for (let attempt = 0; attempt < 300; attempt++) {
      if (await check()) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`timed out waiting for ${what}`);
  };
  const exportOf = async (client: TestClient, userId: string, query = '') => {
    const response = await client.bytes(`/api/v1/users/${userId}/data-export${query}`);
    expect(response.status, response.bytes.toString('utf8').slice(0, 300)).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/zip');
    const files = readZip(response.bytes);
    const json = (name: string) => JSON.parse(files.get(`${name}.json`)!.toString('utf8')) as Rows;
    return { files, json, counts: JSON.parse(response.headers.get('x-export-counts')!) as Record<string, number> };
  };

  beforeAll(async () => {
    running = await startTestGateway({ REPORTS_MATERIALIZE_INTERVAL_MS: '100', REPORTS_MATERIALIZE_LAG_MS: '0' });
    admin = await adminClient(running.client);
    const { services } = running.gateway;
    // With Redis the workers keep the stays (workers/main.ts): run their materializer as they would.
    if (services.jobs.kind === 'bullmq') materializer = startReportMaterializer(services.storage, services.config, services.logger);
    const venue = await createVenue(admin, 'Export venue');
    const fence = await admin.post('/api/v1/geofences', {
      name: 'Export fence',
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      type: 'POLYGON',
      cartesians: squareCartesians(10, 10, 10),
    });
    expect(fence.status, fence.text).toBe(201);
    const make = async (): Promise<Person> => {
      const made = await createUser(admin, 'user');
      const device = `export-${randomUUID().slice(0, 8)}`;
      const assigned = await admin.post('/api/v1/devices', { identifier: device, user_id: made.user.id });
      expect(assigned.status, assigned.text).toBe(201);
      return { ...made, device };
    };
    person = await make();
    bystander = await make();
    // Both walk in and out of the fence (zone events, stays) over two hours, then press DANGER (an alarm).
    const walk = ({ device, user }: Person) => [
      ...[0, 5, 10, 15, 20, 3600, 3605].map((second, index) => ({
        device_id: device,
        user_id: user.id,
        timestamp: at(5, second),
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        x: index % 2 ? 15 : 2,
        y: 15,
      })),
    ];
    const upload = await admin.post('/api/v1/realtime/positions', { poses: [...walk(person), ...walk(bystander)] });
    expect(upload.status, upload.text).toBe(204);
    for (const someone of [person, bystander]) {
      const danger = await admin.post('/api/v1/realtime/positions', {
        poses: [{ ...walk(someone)[0], timestamp: at(7), danger: true }],
      });
      expect(danger.status, danger.text).toBe(204);
    }
    expect(
      (
        await admin.put(`/api/v1/users/${person.user.id}/tracking_window`, {
          time_zone: 'UTC',
          weekly: [{ day: 'mon', from: '08:00', to: '17:00' }],
        })
      ).status,
    ).toBe(200);
    const count = async (table: string, userId: string) =>
      (await sql<{ n: number }>(`select count(*)::int as n from ${table} where user_id = ?`, [userId]))[0]!.n;
    await waitFor(async () => {
      for (const someone of [person, bystander]) {
        for (const table of ['zone_events', 'geofence_stays', 'alarms']) if ((await count(table, someone.user.id)) === 0) return false;
      }
      return true;
    }, 'zone events, stays and alarms of both people');
  }, 120_000);
  afterAll(async () => {
    await materializer?.stop();
    await running?.stop();
  });

  it("holds exactly the person's rows, none of anyone else's, as JSON and CSV in a zip", async () => {
    const { files, json, counts } = await exportOf(person.client, person.user.id);
    const everything = [...files.values()].map((file) => file.toString('utf8')).join('\n');
    expect(everything).not.toContain(bystander.user.id);
    expect(everything).not.toContain(bystander.device);
    expect(everything).not.toContain(bystander.email);
    // Never a secret: the password hash and API key hashes are not exported.
    expect(everything).not.toMatch(/password_hash|key_hash|\$argon2|\$2[aby]\$/);
    for (const name of ['profile', 'devices', 'positions', 'zone_events', 'geofence_stays', 'alarms', 'alarm_events', 'audit_log']) {
      expect(files.has(`${name}.json`) && files.has(`${name}.csv`), name).toBe(true);
    }
    expect(json('profile')).toEqual([expect.objectContaining({ id: person.user.id, email: person.email, role: 'user' })]);
    expect(json('devices').map((row) => row.identifier)).toEqual([person.device]);
    expect(json('tracking_window')).toHaveLength(1);
    // Every one of the person's rows of each table, and only theirs.
    for (const table of ['positions', 'zone_events', 'geofence_stays', 'alarms']) {
      const held = await sql<Record<string, unknown>>(`select * from ${table} where user_id = ?`, [person.user.id]);
      const rows = json(table);
      expect({ table, rows: rows.length }).toEqual({ table, rows: held.length });
      expect(held.length).toBeGreaterThan(0);
      expect(rows.every((row) => row.user_id === person.user.id)).toBe(true);
      expect(counts[table]).toBe(held.length);
    }
    const positions = json('positions');
    expect(positions.map((row) => Date.parse(row.ts as string)).sort()).toEqual(
      [0, 5, 10, 15, 20, 3600, 3605]
        .map((second) => at(5, second))
        .concat(at(7))
        .sort(),
    );
    const alarmIds = json('alarms').map((row) => row.id);
    expect(json('alarm_events').length).toBeGreaterThan(0);
    expect(json('alarm_events').every((row) => alarmIds.includes(row.alarm_id))).toBe(true);
    // Audit: their account's creation and their window, both about them.
    const audit = json('audit_log');
    expect(audit.map((row) => row.object_type)).toEqual(expect.arrayContaining(['users', 'tracking_windows']));
    // The CSV holds the same rows: a header and one line per position.
    const csv = files.get('positions.csv')!.toString('utf8').trim().split('\r\n');
    expect(csv[0]!.split(',')).toEqual(Object.keys(positions[0]!));
    expect(csv).toHaveLength(positions.length + 1);
    // An admin of the organization gets the same rows, and the person's next export shows both exports were taken.
    const byAdmin = await exportOf(admin, person.user.id);
    expect({ ...byAdmin.counts, audit_log: 0 }).toEqual({ ...counts, audit_log: 0 });
    const exports = (await exportOf(person.client, person.user.id)).json('audit_log').filter((row) => row.object_type === 'data_exports');
    expect(exports.map((row) => row.user_email)).toEqual([person.email, ADMIN_EMAIL]);
  });

  it('narrows to from..to, and refuses from after to (422 naming query.from)', async () => {
    const from = new Date(at(6, 10)).toISOString(); // after the walk (its last two are at 6:00:00 and 6:00:05)
    const { json } = await exportOf(person.client, person.user.id, `?from=${encodeURIComponent(from)}`);
    expect(json('positions').map((row) => Date.parse(row.ts as string))).toEqual([at(7)]);
    const backwards = await person.client.get(
      `/api/v1/users/${person.user.id}/data-export?from=${encodeURIComponent(new Date(at(6)).toISOString())}&to=${encodeURIComponent(new Date(at(5)).toISOString())}`,
    );
    expect(backwards.status, backwards.text).toBe(422);
    expect(backwards.body.errors.map((error: { field: string }) => error.field)).toEqual(['query.from']);
    expect((await person.client.get(`/api/v1/users/${person.user.id}/data-export?from=yesterday`)).status).toBe(422);
  });

  it("is the person's own or an admin's: a colleague or a user manager gets 403, another organization 404", async () => {
    expect((await bystander.client.get(`/api/v1/users/${person.user.id}/data-export`)).status).toBe(403);
    const manager = await createUser(admin, 'user_manager');
    expect((await manager.client.get(`/api/v1/users/${person.user.id}/data-export`)).status).toBe(403);
    expect((await admin.get(`/api/v1/users/${randomUUID()}/data-export`)).status).toBe(404);
    const foreign = await createOrganization(admin);
    expect((await foreign.client.get(`/api/v1/users/${person.user.id}/data-export`)).status).toBe(404);
  });

  it('refuses an export with more positions than one archive holds (422: export in parts)', async () => {
    const [{ organization_id: organizationId }] = await sql<{ organization_id: string }>('select organization_id from users where id = ?', [
      person.user.id,
    ]);
    await expect(runDataExport(running.gateway.services.storage, { organizationId, userId: person.user.id }, 3)).rejects.toMatchObject({
      errors: [{ field: 'query.from' }],
    });
  });

  it('hands out nothing of an export that an erasure of the person overtook (409), and all of a later one', async () => {
    const [{ organization_id: organizationId }] = await sql<{ organization_id: string }>('select organization_id from users where id = ?', [
      bystander.user.id,
    ]);
    const { storage } = running.gateway.services;
    let asked = false;
    // The erasure is asked while the export reads the positions (the erasure job itself does not run here).
    const racing = {
      execute: async <T>(text: string, params?: unknown[]) => {
        if (!asked && text.includes('from positions')) {
          asked = true;
          await storage.execute(`insert into erasure_requests (id, organization_id, user_id, status) values (?, ?, ?, 'done')`, [
            randomUUID(),
            organizationId,
            bystander.user.id,
          ]);
        }
        return storage.execute<T>(text, params);
      },
    };
    await expect(runDataExport(racing, { organizationId, userId: bystander.user.id })).rejects.toMatchObject({ status: 409 });
    expect(asked).toBe(true);
    const after = await runDataExport(storage, { organizationId, userId: bystander.user.id });
    expect(after.counts.positions).toBeGreaterThan(0);
  });

  it.runIf(process.env.REDIS_URL)('keeps no finished export in Redis once it is sent (BullMQ)', async () => {
    const { config } = running.gateway.services;
    const connections = redisConnections(config)!;
    const connection = bullConnection(connections, 'test-export-results');
    const queue = new Queue(JOBS_QUEUE_NAME, {
      connection,
      prefix: bullPrefix(connections, config.REDIS_PREFIX),
    });
    try {
      const finishedExports = async () =>
        (await queue.getJobs(['completed'])).filter(
          (job) => job.name === DATA_EXPORT_JOB && (job.data as { data: { userId: string } }).data.userId === person.user.id,
        );
      expect((await person.client.get(`/api/v1/users/${person.user.id}/data-export`)).status).toBe(200);
      await waitFor(async () => (await finishedExports()).length === 0, 'the finished export to leave Redis');
    } finally {
      await queue.close();
      await connection.quit().catch(() => undefined);
    }
  });
});
