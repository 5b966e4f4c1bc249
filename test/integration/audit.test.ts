import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { isWriteRoute } from '../../gateway/auth/authenticator.js';
import { defineRoute } from '../../gateway/http/route.js';
import { AppError, ErrorCode } from '../../shared/errors.js';
import { expireAll } from '../../shared/privacy/retention.js';
import { parseCsv } from '../../testkit/csv.js';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, adminClient, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * Issue 17, audit log: every successful write through the API leaves exactly one entry, stored in the write's
 * transaction, with the actor, the credential, the route and a redacted before/after; a refused write none.
 */

/** Authenticated write routes that leave no entry, each with its reason. Adding one here is a visible decision. */
const EXEMPT: Record<string, RegExp> = {
  'POST /api/v1/realtime/positions': /data, not configuration/,
};

describe(`audit log (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;

  beforeAll(async () => {
    // Two probe routes: a write that forgets its entry, and one whose entry is recorded and then rolled back.
    // The webhook fixture's `.invalid` name never resolves: accepted at creation only with private addresses allowed.
    running = await startTestGateway(
      { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true' },
      {
        extraRoutes: (services) => [
          defineRoute({
            method: 'POST',
            path: '/api/v1/probe/unaudited',
            summary: 'probe',
            auth: 'authenticated',
            hidden: true,
            handler: () => ({ status: 204 }),
          }),
          defineRoute({
            method: 'POST',
            path: '/api/v1/probe/rolled_back',
            summary: 'probe',
            auth: 'authenticated',
            hidden: true,
            handler: async ({ audit }) => {
              await services.storage.em().transactional(async (em) => {
                await audit.record(em, { objectType: 'probe', objectId: 'rolled-back', before: null, after: { x: 1 } });
                throw new AppError(ErrorCode.Conflict, 'fails after its entry');
              });
              return { status: 204 };
            },
          }),
          defineRoute({
            method: 'POST',
            path: '/api/v1/probe/outside',
            summary: 'probe',
            auth: 'authenticated',
            hidden: true,
            handler: async ({ audit }) => {
              await audit.record(services.storage.em(), { objectType: 'probe', objectId: 'outside', before: null, after: null });
              return { status: 204 };
            },
          }),
        ],
      },
    );
    admin = await adminClient(running.client);
  }, 60_000);
  afterAll(async () => running?.stop());

  const entries = async (query: string) => {
    const response = await admin.get(`/api/v1/audit?size=1000&${query}`);
    expect(response.status, response.text).toBe(200);
    return response.body.data as any[];
  };
  /** Entries of writes: security events (sign-ins, refusals) are counted apart (access-hardening.test.ts). */
  const total = async () =>
    ((await admin.get('/api/v1/audit?size=1')).body.metadata.total_elements as number) -
    ((await admin.get('/api/v1/audit?size=1&object_type=security')).body.metadata.total_elements as number);

  it('every authenticated write route is audited, or exempt with a reason', () => {
    const exempt = running.gateway.routes.filter((route) => route.auth !== 'public' && isWriteRoute(route) && route.auditExempt);
    expect(Object.fromEntries(exempt.map((route) => [`${route.method} ${route.path}`, route.auditExempt]))).toEqual(
      Object.fromEntries(Object.entries(EXEMPT).map(([key, reason]) => [key, expect.stringMatching(reason)])),
    );
  });

  it('the entry is part of the write: a write that fails after it leaves none, and an entry failing fails the write', async () => {
    expect((await admin.post('/api/v1/probe/rolled_back')).status).toBe(409);
    expect(await entries('object_type=probe')).toEqual([]);
    // An entry outside any transaction is refused outright (it could outlive a rolled-back write).
    expect((await admin.post('/api/v1/probe/outside')).status).toBe(500);
    expect(await entries('object_type=probe')).toEqual([]);
    // And the other way round: a real route whose entry cannot be stored stores nothing.
    const { storage } = running.gateway.services;
    await storage.execute(`alter table audit_log add constraint probe_refuse_devices check (object_type <> 'devices')`);
    try {
      const identifier = `atomic-${Date.now()}`;
      expect((await admin.post('/api/v1/devices', { identifier })).status).toBe(500);
      expect(await storage.execute('select 1 from devices where identifier = ?', [identifier])).toHaveLength(0);
    } finally {
      await storage.execute('alter table audit_log drop constraint probe_refuse_devices');
    }
  });

  it('a successful write that left no entry is logged as an error', async () => {
    const error = vi.spyOn(running.gateway.services.logger, 'error');
    try {
      expect((await admin.post('/api/v1/probe/unaudited')).status).toBe(204);
      expect(error).toHaveBeenCalledWith(
        expect.objectContaining({ method: 'POST', route: '/api/v1/probe/unaudited' }),
        'a successful write left no audit entry',
      );
      error.mockClear();
      expect((await admin.post('/api/v1/groups', { name: `guarded-${Date.now()}` })).status).toBe(201);
      expect(error).not.toHaveBeenCalled();
    } finally {
      error.mockRestore();
    }
  });

  it('create, update and delete through the resource helper: one entry each, actor, credential, route and diff', async () => {
    const created = await admin.post('/api/v1/groups', { name: 'Night shift', description: 'ward 3' });
    expect(created.status).toBe(201);
    expect((await admin.patch(`/api/v1/groups/${created.body.id}`, { name: 'Day shift' })).status).toBe(200);
    expect((await admin.delete(`/api/v1/groups/${created.body.id}`)).status).toBe(204);

    const log = await entries(`object_type=groups&object_id=${created.body.id}`);
    expect(log.map((entry) => `${entry.method} ${entry.route}`)).toEqual([
      'DELETE /api/v1/groups/:id',
      'PATCH /api/v1/groups/:id',
      'POST /api/v1/groups',
    ]);
    const [deleted, updated, create] = log;
    for (const entry of log) {
      expect(entry).toMatchObject({
        user_email: ADMIN_EMAIL,
        via: 'jwt',
        api_key_id: null,
        object_type: 'groups',
        object_id: created.body.id,
      });
      expect(entry.user_id).toMatch(/^[0-9a-f-]{36}$/);
      expect(entry.address).toMatch(/127\.0\.0\.1|::1/);
      expect(Date.parse(entry.at)).toBeGreaterThan(Date.now() - 60_000);
    }
    expect(create.before).toBeNull();
    expect(create.after).toMatchObject({ id: created.body.id, name: 'Night shift', description: 'ward 3' });
    // Only what changed: the name (and the update time), not the untouched description.
    expect(Object.keys(updated.after).sort()).toEqual(Object.keys(updated.before).sort());
    expect(updated.before).toMatchObject({ name: 'Night shift' });
    expect(updated.after).toMatchObject({ name: 'Day shift' });
    expect(updated.after).not.toHaveProperty('description');
    expect(deleted.before).toMatchObject({ name: 'Day shift' });
    expect(deleted.after).toBeNull();
  });

  it('a password change is logged with the password redacted, and signs nothing secret into the log', async () => {
    const member = await createUser(admin, 'user');
    expect((await admin.patch(`/api/v1/users/${member.user.id}`, { password: 'a-new-secret-pass', full_name: 'Renamed' })).status).toBe(
      200,
    );
    const [change, creation, ...rest] = await entries(`object_type=users&object_id=${member.user.id}`);
    expect(rest).toEqual([]);
    expect(creation.after).toMatchObject({ email: member.email, password: '[redacted]' });
    expect(change.before).toMatchObject({ password: '[redacted]', full_name: 'A user' });
    expect(change.after).toMatchObject({ password: '[redacted]', full_name: 'Renamed' });
    const text = JSON.stringify([change, creation]);
    expect(text).not.toContain('a-new-secret-pass');
    expect(text).not.toContain(member.password);
    expect(text).not.toMatch(/\$argon|\$2[aby]\$|scrypt/i);
  });

  it('an API key creation holds no key material; writes with that key name it as the credential', async () => {
    const created = await admin.post('/api/v1/auth/apikeys', { permission: 'read-write', description: 'ci' });
    expect(created.status).toBe(201);
    const key: string = created.body.apikey;
    const [entry, ...rest] = await entries(`object_type=apikeys&object_id=${created.body.id}`);
    expect(rest).toEqual([]);
    expect(entry).toMatchObject({ method: 'POST', route: '/api/v1/auth/apikeys', before: null });
    expect(entry.after).toMatchObject({ id: created.body.id, permission: 'read-write', apikey: '[redacted]' });
    const text = JSON.stringify(entry);
    expect(text).not.toContain(key);
    expect(text).not.toContain(key.slice(-8));

    const withKey = running.client.withHeaders({ 'x-api-key': key });
    const group = await withKey.post('/api/v1/groups', { name: 'By key' });
    expect(group.status).toBe(201);
    const [byKey] = await entries(`object_type=groups&object_id=${group.body.id}`);
    expect(byKey).toMatchObject({ via: 'apikey', api_key_id: created.body.id, user_email: ADMIN_EMAIL });

    expect((await admin.delete(`/api/v1/auth/apikeys/${created.body.id}`)).status).toBe(204);
    const [revoked] = await entries(`object_type=apikeys&object_id=${created.body.id}`);
    expect(revoked).toMatchObject({ method: 'DELETE', after: null });
    expect(JSON.stringify(revoked)).not.toContain(key.slice(-8));
  });

  it('webhooks: create, change and delete leave one entry each, and the signing secret never reaches the log', async () => {
    // .invalid never resolves: nothing is ever sent.
    const created = await admin.post('/api/v1/webhooks', { url: 'https://audit-receiver.invalid/hook', events: ['alarm.raised'] });
    expect(created.status, created.text).toBe(201);
    const secret: string = created.body.secret;
    expect(secret).toMatch(/^whsec_/);
    const [entry, ...rest] = await entries(`object_type=webhooks&object_id=${created.body.id}`);
    expect(rest).toEqual([]);
    expect(entry).toMatchObject({ method: 'POST', route: '/api/v1/webhooks', before: null });
    expect(entry.after).toMatchObject({ id: created.body.id, url: 'https://audit-receiver.invalid/hook' });
    expect(JSON.stringify(entry)).not.toContain(secret.slice(6, 20));

    expect((await admin.patch(`/api/v1/webhooks/${created.body.id}`, { description: 'pager' })).status).toBe(200);
    expect((await admin.delete(`/api/v1/webhooks/${created.body.id}`)).status).toBe(204);
    const all = await entries(`object_type=webhooks&object_id=${created.body.id}`);
    expect(all.map((e) => e.method)).toEqual(['DELETE', 'PATCH', 'POST']);
    expect(all[1].before).toMatchObject({ description: '' });
    expect(all[1].after).toMatchObject({ description: 'pager' });
    expect(all[0].after).toBeNull();
    expect(JSON.stringify(all)).not.toContain(secret.slice(6, 20));
  });

  it('an alarm raise and state change: one entry each, with the state before and after', async () => {
    const raised = await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: `audit-${Date.now()}` });
    expect(raised.status, raised.text).toBe(201);
    expect((await admin.patch(`/api/v1/alarms/${raised.body.id}`, { state: 'CONFIRMED', comment: 'on my way' })).status).toBe(200);
    const [changed, raise, ...rest] = await entries(`object_type=alarms&object_id=${raised.body.id}`);
    expect(rest).toEqual([]);
    expect(raise).toMatchObject({ method: 'POST', route: '/api/v1/alarms', before: null });
    expect(raise.after).toMatchObject({ type: 'DANGER', state: 'OPEN' });
    expect(changed).toMatchObject({ method: 'PATCH', route: '/api/v1/alarms/:id' });
    expect(changed.before).toMatchObject({ state: 'OPEN' });
    expect(changed.after).toMatchObject({ state: 'CONFIRMED' });
  });

  it('hand-written cartography writes: the path graph by its size, dead-man settings by field', async () => {
    const venue = await createVenue(admin, 'Audit venue');
    const floor = venue.floors[0].id;
    const nodes = [1, 2, 3].map((id) => ({ id, floor_id: floor, x: id, y: 1 }));
    expect((await admin.put(`/api/v1/buildings/${venue.building.id}/paths`, { nodes, links: [{ source: 1, target: 2 }] })).status).toBe(
      200,
    );
    const [paths] = await entries(`object_type=paths&object_id=${venue.building.id}`);
    expect(paths).toMatchObject({ route: '/api/v1/buildings/:building_id/paths', before: null, after: { nodes: 3, links: 1 } });
    expect((await admin.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, { deadman_after_s: 60 })).status).toBe(200);
    const [settings] = await entries(`object_type=alarm_settings&object_id=${venue.building.id}`);
    expect(settings).toMatchObject({ before: { deadman_after_s: null }, after: { deadman_after_s: 60 } });
  });

  it('a refused write (422, 403, 409) leaves no entry', async () => {
    const manager = await createUser(admin, 'user_manager');
    const member = await createUser(admin, 'user');
    const group = await admin.post('/api/v1/groups', { name: 'Untouched' });
    const before = await total();
    expect((await admin.post('/api/v1/groups', {})).status).toBe(422);
    expect((await member.client.patch(`/api/v1/groups/${group.body.id}`, { name: 'x' })).status).toBe(403);
    expect((await member.client.delete(`/api/v1/groups/${group.body.id}`)).status).toBe(403);
    expect((await manager.client.post('/api/v1/buildings', { name: 'no' })).status).toBe(403);
    // Refused inside the transaction, after the update ran: rolled back with its entry.
    expect((await manager.client.patch(`/api/v1/users/${manager.user.id}`, { role: 'user' })).status).toBe(409);
    expect((await admin.post('/api/v1/groups', { name: 'Untouched' })).status).toBe(409);
    expect(await total()).toBe(before);
  });

  it('filters by user and time, paginates newest first, and refuses everyone but admins', async () => {
    const manager = await createUser(admin, 'user_manager');
    const from = new Date(Date.now() - 1000).toISOString();
    const ids: string[] = [];
    for (const name of ['p1', 'p2', 'p3'])
      ids.push((await manager.client.post('/api/v1/groups', { name: `${name}-${Date.now()}` })).body.id);
    const mine = await entries(`user_id=${manager.user.id}&object_type=groups`);
    expect(mine.map((entry) => entry.object_id)).toEqual([...ids].reverse());
    const page = await admin.get(`/api/v1/audit?user_id=${manager.user.id}&object_type=groups&size=2&page=1`);
    expect(page.body.data.map((entry: { object_id: string }) => entry.object_id)).toEqual([ids[0]]);
    expect(page.body.metadata).toMatchObject({ total_elements: 3, total_pages: 2, number: 1, last: true });
    expect(await entries(`user_id=${manager.user.id}&object_type=groups&from_date=${encodeURIComponent(from)}`)).toHaveLength(3);
    expect(await entries(`user_id=${manager.user.id}&object_type=groups&to_date=${encodeURIComponent(from)}`)).toHaveLength(0);
    expect((await admin.get(`/api/v1/audit?from_date=${encodeURIComponent(from)}&to_date=${encodeURIComponent(from)}`)).status).toBe(422);
    expect((await manager.client.get('/api/v1/audit')).status).toBe(403);
    const member = await createUser(admin, 'user');
    expect((await member.client.get('/api/v1/audit')).status).toBe(403);
    expect((await member.client.get('/api/v1/audit.csv')).status).toBe(403);
  });

  it('exports the same entries as CSV, newest first', async () => {
    const group = await admin.post('/api/v1/groups', { name: '=formula, "quoted"' });
    const response = await admin.get(`/api/v1/audit.csv?object_type=groups&object_id=${group.body.id}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/csv');
    expect(response.headers.get('content-disposition')).toMatch(/attachment; filename="audit-/);
    const rows = parseCsv(response.text);
    expect(rows[0]).toEqual([
      'id',
      'at',
      'user_id',
      'user_email',
      'via',
      'api_key_id',
      'method',
      'route',
      'object_type',
      'object_id',
      'before',
      'after',
      'address',
    ]);
    expect(rows).toHaveLength(2);
    expect(rows[1]!.slice(4, 10)).toEqual(['jwt', '', 'POST', '/api/v1/groups', 'groups', group.body.id]);
    expect(JSON.parse(rows[1]![11]!)).toMatchObject({ name: '=formula, "quoted"' });
  });

  it('retention forgets entries older than the configured days', async () => {
    const { storage } = running.gateway.services;
    const [{ id: organizationId }] = await storage.execute<{ id: string }>('select id from organizations order by created_at limit 1');
    await storage.execute(
      `insert into audit_log (organization_id, at, via, method, route, object_type, object_id, changes) values (?, now() - interval '40 days', 'jwt', 'POST', '/old', 'old', 'ancient', '{}'::jsonb)`,
      [organizationId],
    );
    expect(await entries('object_type=old')).toHaveLength(1);
    const countBefore = await total();
    const maxima = { positions: null, zone_events: null, stays_and_rollups: null, alarm_positions: null };
    expect((await expireAll(storage, { ...maxima, audit: 30 })).get(organizationId)).toMatchObject({ audit_log: 1 });
    expect(await entries('object_type=old')).toHaveLength(0);
    expect(await total()).toBe(countBefore - 1);
    expect((await expireAll(storage, { ...maxima, audit: null })).size).toBe(0);
  });
});
