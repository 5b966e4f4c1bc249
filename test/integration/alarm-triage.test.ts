import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AlarmType } from '../../shared/detection/alarm-states.js';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createUser, login } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { WebhookReceiver } from '../../testkit/webhook-receiver.js';
import { TestSocket } from '../../testkit/ws-client.js';

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

describe(`alarm triage: severity, escalation, resolution comments, bulk changes (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let token: string;
  let receiver: WebhookReceiver;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  const sockets: TestSocket[] = [];

  /** Raises as the system does (DEADMAN, max-stay... are refused through the API). */
  const raise = async (type: AlarmType, deviceId: string, extra: { buildingId?: number; details?: Record<string, unknown> } = {}) => {
    const [organization] = await running.gateway.services.storage.execute<{ id: string }>(
      'select organization_id as id from users where email = ?',
      [ADMIN_EMAIL],
    );
    const message = await running.gateway.services.alarms.raise({
      organizationId: organization!.id,
      type,
      deviceId,
      by: 'system',
      buildingId: extra.buildingId ?? null,
      details: extra.details,
    });
    return message.event;
  };
  const sweep = (at: number) => running.gateway.services.sweep.run(at);

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    running = await startTestGateway({
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true',
      WEBHOOK_RETRY_SCHEDULE: '0.2,0.2,1',
      WEBHOOK_TIMEOUT_MS: '2000',
    });
    admin = await adminClient(running.client);
    token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    venue = await createVenue(admin, 'Triage venue');
  });
  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await running?.stop();
    await receiver?.close();
  });

  it('gives every alarm the severity of its type, in bodies, frames, replays and webhooks', async () => {
    const hook = (await admin.post('/api/v1/webhooks', { url: receiver.url('/severity'), events: ['alarm.raised'] })).body;
    const socket = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    sockets.push(socket);
    await socket.request({ op: 'subscribe', topics: ['organization/alarms'] });
    const danger = (await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'sev-danger' })).body;
    expect(danger.severity).toBe('critical');
    const expected: Record<AlarmType, string> = {
      DANGER: 'critical',
      EMERGENCY: 'critical',
      ASSISTANCE_REQUEST: 'critical',
      DEADMAN: 'high',
      BREACH: 'high',
      BUILDING_SILENT: 'high',
      GEOFENCE_MAX_STAY_TIME: 'normal',
      STATIONARY: 'normal',
    };
    for (const [type, severity] of Object.entries(expected)) {
      const raised = await raise(type as AlarmType, `sev-${type}`);
      expect(raised.severity, type).toBe(severity);
      expect((await admin.get(`/api/v1/alarms/${raised.id}`)).body.severity, type).toBe(severity);
      const frame = await socket.next((f) => f.op === 'alarm' && f.data.id === raised.id);
      expect(frame.data.severity, type).toBe(severity);
    }
    const replay = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    sockets.push(replay);
    await replay.request({ op: 'subscribe', topics: ['organization/alarms'], since_seq: 0 });
    expect((await replay.next((f) => f.op === 'alarm' && f.replay && f.data.id === danger.id)).data.severity).toBe('critical');
    const delivered = await until('the DANGER webhook', () =>
      receiver.delivered('/severity').find((receipt) => JSON.parse(receipt.body).data.id === danger.id),
    );
    expect(JSON.parse(delivered.body).data.severity).toBe('critical');
    await admin.delete(`/api/v1/webhooks/${hook.id}`);
  });

  it('lists worst first, newest first within, and filters by severity and type', async () => {
    const normal = await raise('GEOFENCE_MAX_STAY_TIME', 'order-normal', { buildingId: venue.building.id });
    await sleep(5);
    const critical = (await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'order-critical', building_id: venue.building.id }))
      .body;
    await sleep(5);
    const high = await raise('DEADMAN', 'order-high', { buildingId: venue.building.id });
    await sleep(5);
    const newerNormal = await raise('STATIONARY', 'order-normal-2', { buildingId: venue.building.id });
    const listedResponse = await admin.get(`/api/v1/alarms?building_id=${venue.building.id}&size=100`);
    expect(listedResponse.status, listedResponse.text).toBe(200);
    const listed = listedResponse.body.data as { id: string; severity: string; created_at: string }[];
    expect(listed.map((alarm) => alarm.id)).toEqual([critical.id, high.id, newerNormal.id, normal.id]);

    const all = (await admin.get('/api/v1/alarms?size=1000')).body.data as { severity: string; created_at: string }[];
    const rank = { critical: 0, high: 1, normal: 2 } as Record<string, number>;
    for (let i = 1; i < all.length; i++) {
      const [before, after] = [all[i - 1]!, all[i]!];
      expect(
        rank[before.severity]! < rank[after.severity]! || (before.severity === after.severity && before.created_at >= after.created_at),
      ).toBe(true);
    }
    const highs = (await admin.get('/api/v1/alarms?severity=high&size=1000')).body.data as { severity: string }[];
    expect(highs.length).toBeGreaterThan(0);
    expect(highs.every((alarm) => alarm.severity === 'high')).toBe(true);
    const some = (await admin.get('/api/v1/alarms?severity=critical,normal&type=DANGER,STATIONARY&size=1000')).body.data as {
      type: string;
    }[];
    expect(new Set(some.map((alarm) => alarm.type))).toEqual(new Set(['DANGER', 'STATIONARY']));
    // Newest first across severities when asked.
    const byTime = (await admin.get(`/api/v1/alarms?building_id=${venue.building.id}&sort=created_at,desc`)).body.data as { id: string }[];
    expect(byTime.map((alarm) => alarm.id)).toEqual([newerNormal.id, high.id, critical.id, normal.id]);

    for (const bad of ['severity=urgent', 'type=FIRE', 'sort=constructor', 'sort=__proto__', 'sort=toString,asc']) {
      const response = await admin.get(`/api/v1/alarms?${bad}`);
      expect(response.status, bad).toBe(422);
      expect(response.body.errors[0].field, bad).toMatch(/^query\.(severity|type|sort)/);
    }
  });

  it('needs a comment to close or mark false a critical or high alarm, and records who did what and when', async () => {
    const danger = (await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'comment-danger' })).body;
    for (const state of ['CLOSED', 'MARKED_FALSE']) {
      for (const comment of [undefined, '   ']) {
        const refused = await admin.patch(`/api/v1/alarms/${danger.id}`, { state, comment });
        expect(refused.status).toBe(422);
        expect(refused.body.errors).toEqual([expect.objectContaining({ field: 'comment' })]);
      }
    }
    expect((await admin.get(`/api/v1/alarms/${danger.id}`)).body.state).toBe('OPEN');
    // Confirming needs none; closing with one records it.
    const confirmed = await admin.patch(`/api/v1/alarms/${danger.id}`, { state: 'CONFIRMED' });
    expect(confirmed.status).toBe(200);
    const closed = await admin.patch(`/api/v1/alarms/${danger.id}`, { state: 'CLOSED', comment: 'Fell on the stairs, nurse attended' });
    expect(closed.status, closed.text).toBe(200);
    const stored = (await admin.get(`/api/v1/alarms/${danger.id}`)).body;
    // Once closed, another verdict is refused for what it is (409), not for a missing comment.
    expect((await admin.patch(`/api/v1/alarms/${danger.id}`, { state: 'MARKED_FALSE' })).status).toBe(409);
    expect(stored.history.slice(1)).toEqual([
      { state: 'CONFIRMED', from: 'OPEN', at: expect.any(String), by: { user_id: expect.any(String), email: ADMIN_EMAIL }, comment: null },
      {
        state: 'CLOSED',
        from: 'CONFIRMED',
        at: expect.any(String),
        by: { user_id: expect.any(String), email: ADMIN_EMAIL },
        comment: 'Fell on the stairs, nurse attended',
      },
    ]);
    const deadman = await raise('DEADMAN', 'comment-deadman');
    expect((await admin.patch(`/api/v1/alarms/${deadman.id}`, { state: 'MARKED_FALSE' })).status).toBe(422);
    // A normal alarm closes without one, unless the organization asks a comment for every alarm.
    const stay = await raise('GEOFENCE_MAX_STAY_TIME', 'comment-stay');
    expect((await admin.patch(`/api/v1/alarms/${stay.id}`, { state: 'CLOSED' })).status).toBe(200);
    expect(
      (await admin.put('/api/v1/organizations/current_organization/alarm_settings', { comment_always: true })).body.comment_always,
    ).toBe(true);
    const stay2 = await raise('STATIONARY', 'comment-stay-2');
    const refused = await admin.patch(`/api/v1/alarms/${stay2.id}`, { state: 'CLOSED' });
    expect(refused.status).toBe(422);
    expect(refused.body.errors[0].field).toBe('comment');
    expect(
      (await admin.put('/api/v1/organizations/current_organization/alarm_settings', { comment_always: false })).body.comment_always,
    ).toBe(false);
    expect((await admin.patch(`/api/v1/alarms/${stay2.id}`, { state: 'CLOSED' })).status).toBe(200);
  });

  it('validates the organization alarm settings, admins only, and audits them', async () => {
    const defaults = (await admin.get('/api/v1/organizations/current_organization/alarm_settings')).body;
    expect(defaults).toEqual({ escalate_after_s: 60, escalate_max: 3, comment_always: false, deadman_auto_close: false });
    for (const [field, value] of [
      ['escalate_after_s', -1],
      ['escalate_after_s', 0],
      ['escalate_after_s', 1.5],
      ['escalate_max', -1],
      ['comment_always', 'yes'],
      ['nonsense', 1],
    ] as const) {
      const response = await admin.put('/api/v1/organizations/current_organization/alarm_settings', { [field]: value });
      expect(response.status, `${field}=${value}`).toBe(422);
      expect(JSON.stringify(response.body.errors), `${field}=${value}`).toContain(field);
    }
    expect((await admin.get('/api/v1/organizations/current_organization/alarm_settings')).body).toEqual(defaults);
    const manager = await createUser(admin, 'user_manager');
    expect((await manager.client.put('/api/v1/organizations/current_organization/alarm_settings', { escalate_max: 0 })).status).toBe(403);
    expect((await manager.client.get('/api/v1/organizations/current_organization/alarm_settings')).status).toBe(200);
    expect((await admin.put('/api/v1/organizations/current_organization/alarm_settings', { escalate_max: 5 })).body).toEqual({
      ...defaults,
      escalate_max: 5,
    });
    const audit = (await admin.get('/api/v1/audit?object_type=alarm_settings&size=100')).body.data as {
      before: { escalate_max?: number };
      after: { escalate_max?: number };
    }[];
    expect(audit.some((entry) => entry.before?.escalate_max === 3 && entry.after?.escalate_max === 5)).toBe(true);
    await admin.put('/api/v1/organizations/current_organization/alarm_settings', { escalate_max: 3 });
  });

  it('escalates an unconfirmed critical alarm after escalate_after_s, at most escalate_max times, and stops on confirm', async () => {
    expect(
      (await admin.put('/api/v1/organizations/current_organization/alarm_settings', { escalate_after_s: 30, escalate_max: 2 })).status,
    ).toBe(200);
    const hook = (await admin.post('/api/v1/webhooks', { url: receiver.url('/escalated'), events: ['alarm.escalated'] })).body;
    const socket = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    sockets.push(socket);
    await socket.request({ op: 'subscribe', topics: ['organization/alarms'] });
    const danger = (await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'escalate-me' })).body;
    const confirmedLater = (await admin.post('/api/v1/alarms', { type: 'ASSISTANCE_REQUEST', device_id: 'confirm-me' })).body;
    const deadman = await raise('DEADMAN', 'not-critical');
    const raisedAt = Date.parse(danger.created_at);
    const escalations = async (id: string) =>
      ((await admin.get(`/api/v1/alarms/${id}`)).body.history as { event?: string }[]).filter((entry) => entry.event === 'escalated');

    await sweep(raisedAt + 29_000);
    expect(await escalations(danger.id)).toHaveLength(0);
    // Two gateways sweeping at once (an alarm of no building is every gateway's): it escalates once.
    await Promise.all([sweep(raisedAt + 31_000), sweep(raisedAt + 31_000)]);
    const first = await escalations(danger.id);
    expect(first).toEqual([
      { state: 'OPEN', from: 'OPEN', at: new Date(raisedAt + 31_000).toISOString(), by: 'system', comment: null, event: 'escalated' },
    ]);
    const frame = await socket.next((f) => f.op === 'alarm' && f.data.id === danger.id && f.data.event === 'escalated');
    expect(frame.data).toMatchObject({ state: 'OPEN', severity: 'critical' });
    expect(frame.data.seq).toBeGreaterThan(danger.seq);
    const delivered = await until('the alarm.escalated webhook', () =>
      receiver.delivered('/escalated').find((receipt) => JSON.parse(receipt.body).data.id === danger.id),
    );
    expect(JSON.parse(delivered.body)).toMatchObject({
      type: 'alarm.escalated',
      data: { id: danger.id, severity: 'critical', state: 'OPEN' },
    });

    // The other critical one is confirmed: it never escalates again. A high alarm never escalates.
    expect(await escalations(confirmedLater.id)).toHaveLength(1);
    expect((await admin.patch(`/api/v1/alarms/${confirmedLater.id}`, { state: 'CONFIRMED' })).status).toBe(200);
    await sweep(raisedAt + 45_000); // within escalate_after_s of the last escalation: nothing
    expect(await escalations(danger.id)).toHaveLength(1);
    await sweep(raisedAt + 62_000);
    expect(await escalations(danger.id)).toHaveLength(2);
    for (const later of [raisedAt + 100_000, raisedAt + 1_000_000]) await sweep(later);
    expect(await escalations(danger.id)).toHaveLength(2); // escalate_max
    expect(await escalations(confirmedLater.id)).toHaveLength(1);
    expect(await escalations(deadman.id)).toHaveLength(0);
    const stored = await running.gateway.services.storage.execute<{ kind: string }>(
      'select kind from alarm_events where alarm_id = ? order by seq',
      [danger.id],
    );
    expect(stored.map((row) => row.kind)).toEqual(['raised', 'escalated', 'escalated']);
    await admin.delete(`/api/v1/webhooks/${hook.id}`);
    await admin.put('/api/v1/organizations/current_organization/alarm_settings', { escalate_after_s: 60, escalate_max: 3 });
  });

  it('follows a change of the escalation policy for alarms already scheduled: 0 switches it off, a shorter window applies at once', async () => {
    expect((await admin.put('/api/v1/organizations/current_organization/alarm_settings', { escalate_max: 0 })).status).toBe(200);
    const danger = (await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'policy-change' })).body;
    const raisedAt = Date.parse(danger.created_at);
    const escalated = async () =>
      ((await admin.get(`/api/v1/alarms/${danger.id}`)).body.history as { event?: string }[]).filter((entry) => entry.event === 'escalated')
        .length;
    await sweep(raisedAt + 3_600_000);
    expect(await escalated()).toBe(0);
    // Scheduled as never by that sweep: the new policy reschedules it.
    expect(
      (await admin.put('/api/v1/organizations/current_organization/alarm_settings', { escalate_max: 1, escalate_after_s: 10 })).status,
    ).toBe(200);
    await sweep(raisedAt + 9_000);
    expect(await escalated()).toBe(0);
    await sweep(raisedAt + 11_000);
    expect(await escalated()).toBe(1);
    await admin.patch(`/api/v1/alarms/${danger.id}`, { state: 'CLOSED', comment: 'policy test' });
    await admin.put('/api/v1/organizations/current_organization/alarm_settings', { escalate_after_s: 60, escalate_max: 3 });
  });

  it('changes many alarms at once by ids or filter, each as one PATCH would, within the organization', async () => {
    const socket = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    sockets.push(socket);
    await socket.request({ op: 'subscribe', topics: ['organization/alarms'] });
    const building = venue.building.id;
    const stormStarted = new Date().toISOString();
    const storm = [];
    for (let i = 0; i < 6; i++) storm.push(await raise('DEADMAN', `storm-${i}`, { buildingId: building, details: { reason: 'silence' } }));
    const danger = (await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'storm-danger', building_id: building })).body;

    const noComment = await admin.post('/api/v1/alarms/bulk', {
      filter: { type: 'DEADMAN', building_id: building, state: 'OPEN', from_date: stormStarted },
      state: 'CLOSED',
    });
    expect(noComment.status).toBe(422);
    expect(noComment.body.errors[0].field).toBe('comment');
    expect((await admin.get(`/api/v1/alarms/${storm[0]!.id}`)).body.state).toBe('OPEN');

    const closed = await admin.post('/api/v1/alarms/bulk', {
      filter: { type: 'DEADMAN', severity: ['high'], building_id: building, state: ['OPEN'], from_date: stormStarted },
      state: 'CLOSED',
      comment: 'Wi-Fi outage on the ground floor',
    });
    expect(closed.status, closed.text).toBe(200);
    expect(closed.body).toMatchObject({ matched: 6, changed: 6, skipped: [] });
    expect(new Set(closed.body.changed_ids)).toEqual(new Set(storm.map((alarm) => alarm.id)));
    for (const alarm of storm) {
      const stored = (await admin.get(`/api/v1/alarms/${alarm.id}`)).body;
      expect(stored.state).toBe('CLOSED');
      expect(stored.history.at(-1)).toMatchObject({
        state: 'CLOSED',
        from: 'OPEN',
        comment: 'Wi-Fi outage on the ground floor',
        by: { email: ADMIN_EMAIL },
      });
      const frame = await socket.next((f) => f.op === 'alarm' && f.data.id === alarm.id && f.data.state === 'CLOSED');
      expect(frame.data.event).toBe('state_changed');
    }
    const seqs = (
      await running.gateway.services.storage.execute<{ seq: string }>(
        `select seq from alarm_events where kind = 'state_changed' and alarm_id in (${storm.map(() => '?').join(',')})`,
        storm.map((a) => a.id),
      )
    ).map((row) => Number(row.seq));
    expect(new Set(seqs).size).toBe(6);
    const audited = (await admin.get('/api/v1/audit?object_type=alarms&size=1000')).body.data as {
      object_id: string;
      after: { state?: string };
    }[];
    for (const alarm of storm) expect(audited.some((entry) => entry.object_id === alarm.id && entry.after?.state === 'CLOSED')).toBe(true);
    expect((await admin.get(`/api/v1/alarms/${danger.id}`)).body.state).toBe('OPEN');

    // By ids, with one already closed: it is skipped, the DANGER changes.
    const byIds = await admin.post('/api/v1/alarms/bulk', { ids: [danger.id, storm[0]!.id], state: 'MARKED_FALSE', comment: 'drill' });
    expect(byIds.body).toMatchObject({
      matched: 2,
      changed: 1,
      changed_ids: [danger.id],
      skipped: [{ id: storm[0]!.id, state: 'CLOSED' }],
    });

    // Another organization's alarm, named by id, is not found, and a user without alarms:manage is refused.
    const outsider = await createUser(admin, 'user');
    expect((await outsider.client.post('/api/v1/alarms/bulk', { ids: [danger.id], state: 'CLOSED', comment: 'x' })).status).toBe(403);
    const platform = admin;
    const { client: other } = await (await import('../../testkit/identity.js')).createOrganization(platform);
    const foreign = await other.post('/api/v1/alarms/bulk', { ids: storm.map((alarm) => alarm.id), state: 'OTHER', comment: 'not mine' });
    expect(foreign.body).toMatchObject({ matched: 0, changed: 0 });
  });

  it('refuses bad bulk requests with a 422 naming the field, changing nothing', async () => {
    const many = Array.from({ length: 501 }, () => crypto.randomUUID());
    const cases: [object, string][] = [
      [{ state: 'CLOSED', comment: 'x' }, 'ids'],
      [{ ids: many, state: 'CLOSED', comment: 'x' }, 'ids'],
      [{ ids: [], state: 'CLOSED', comment: 'x' }, 'ids'],
      [{ filter: { severity: 'urgent' }, state: 'CLOSED', comment: 'x' }, 'filter.severity'],
      [{ filter: { type: 'FIRE' }, state: 'CLOSED', comment: 'x' }, 'filter.type'],
      [{ filter: { colour: 'red' }, state: 'CLOSED', comment: 'x' }, 'filter'],
      [{ filter: {}, state: 'SOLVED', comment: 'x' }, 'state'],
    ];
    for (const [body, field] of cases) {
      const response = await admin.post('/api/v1/alarms/bulk', body);
      expect(response.status, JSON.stringify(body)).toBe(422);
      expect(response.body.errors.map((error: { field: string }) => error.field).join(' '), JSON.stringify(body)).toContain(field);
    }
    // A filter naming more than 500 alarms is refused before any changes.
    const [organization] = await running.gateway.services.storage.execute<{ id: string }>(
      'select organization_id as id from users where email = ?',
      [ADMIN_EMAIL],
    );
    await running.gateway.services.storage.execute(
      `insert into alarms (id, organization_id, seq, type, state, device_id, details, history) select gen_random_uuid(), ?, 0, 'STATIONARY', 'OPEN', 'bulk-' || n, '{}', '[]' from generate_series(1, 501) n`,
      [organization!.id],
    );
    const tooMany = await admin.post('/api/v1/alarms/bulk', {
      filter: { type: 'STATIONARY', state: 'OPEN' },
      state: 'CLOSED',
      comment: 'x',
    });
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.errors[0].field).toBe('filter');
    const [{ open }] = (await running.gateway.services.storage.execute<{ open: number }>(
      `select count(*)::int as open from alarms where type = 'STATIONARY' and state = 'OPEN'`,
    )) as [{ open: number }];
    expect(open).toBeGreaterThan(500);
  });
});
