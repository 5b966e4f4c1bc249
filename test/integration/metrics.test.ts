import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, login } from '../../testkit/identity.js';
import { parsePrometheus, scrape, type Samples } from '../../testkit/prometheus.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

const TOKEN = 'metrics-token-for-tests-0123456789';

describe(`GET /metrics (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  let metricsUrl: string;
  const read = () => scrape(metricsUrl, TOKEN);

  beforeAll(async () => {
    // METRICS_PORT=auto: a free port chosen by the system (0 would turn the listener off).
    running = await startTestGateway({ METRICS_PORT: 'auto', METRICS_TOKEN: TOKEN });
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Metrics venue');
    metricsUrl = `http://127.0.0.1:${running.gateway.metricsPort}/metrics`;
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('counts an upload and an alarm by exactly what they did', async () => {
    await admin.post('/api/v1/geofences', {
      name: 'Ward M',
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      type: 'POLYGON',
      cartesians: squareCartesians(10, 10, 10),
    });
    const at = (deviceId: string, x: number, extra: object = {}) => ({
      device_id: deviceId,
      timestamp: Date.now(),
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x,
      y: 5,
      ...extra,
    });
    // Devices placed first, so the measured batch holds one enter (m-1 walks into the ward) and one DANGER press.
    expect((await admin.post('/api/v1/realtime/positions', { poses: [at('m-1', 5), at('m-2', 5)] })).status).toBe(204);
    const before = await read();

    const poses = [at('m-1', 15, { y: 15 }), at('m-2', 6, { danger: true }), at('m-3', 30), at('m-4', 31), at('m-5', 32)];
    expect((await admin.post('/api/v1/realtime/positions', { poses })).status).toBe(204);
    const refused = [at('m-6', 1), { device_id: 'm-7' }, { device_id: 'm-8', timestamp: 'yesterday' }];
    expect((await admin.post('/api/v1/realtime/positions', { poses: refused })).status).toBe(422);

    // Detection runs on the building's owner once the positions are handed over, after the 204: wait for the enter.
    let after = await read();
    const enters = (metrics: typeof after) => metrics.value('floorcast_zone_events_total', { type: 'enter', zone_kind: 'geofence' });
    for (const started = Date.now(); enters(after) === enters(before) && Date.now() - started < 10_000; after = await read())
      await new Promise((resolve) => setTimeout(resolve, 50));
    const moved = (name: string, labels: Record<string, string> = {}) => after.value(name, labels) - before.value(name, labels);
    expect(moved('floorcast_positions_accepted_total')).toBe(poses.length);
    expect(moved('floorcast_positions_refused_total', { reason: 'invalid' })).toBe(refused.length);
    expect(moved('floorcast_upload_batch_poses_count')).toBe(2);
    expect(moved('floorcast_upload_batch_poses_sum')).toBe(poses.length + refused.length);
    expect(moved('floorcast_upload_to_publish_seconds_count')).toBe(1);
    expect(moved('floorcast_alarms_raised_total', { type: 'DANGER' })).toBe(1);
    expect(moved('floorcast_alarms_raised_total', { type: 'DEADMAN' })).toBe(0);
    expect(moved('floorcast_zone_events_total', { type: 'enter', zone_kind: 'geofence' })).toBe(1);
    expect(moved('floorcast_zone_events_total', { type: 'exit', zone_kind: 'geofence' })).toBe(0);
    expect(moved('floorcast_bus_published_total', { channel: 'positions' })).toBe(1);
    expect(moved('floorcast_bus_published_total', { channel: 'alarms' })).toBe(1);
    // One upload's rows (positions and its zone event) were committed; commits may have been shared or split.
    expect(moved('floorcast_group_commit_rows_sum')).toBe(poses.length + 1);
    expect(moved('floorcast_group_commit_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(after.value('floorcast_map_entries', { map: 'device_directory' })).toBeGreaterThanOrEqual(5);
    expect(after.value('floorcast_map_entries', { map: 'live_positions' })).toBeGreaterThanOrEqual(5);
    expect(after.value('floorcast_map_entries', { map: 'building_runtimes' })).toBeGreaterThanOrEqual(1);
    expect(after.value('floorcast_map_entries', { map: 'detection_tracked_devices' })).toBeGreaterThanOrEqual(5);
  });

  it('reports sockets and subscriptions as they are at scrape time', async () => {
    const token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    const socket = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    try {
      expect(
        (
          await socket.request({
            op: 'subscribe',
            topics: [`buildings/${venue.building.id}/positions`, `buildings/${venue.building.id}/alarms`],
          })
        ).op,
      ).toBe('subscribed');
      const open = await read();
      expect(open.value('floorcast_ws_connections')).toBe(1);
      expect(open.value('floorcast_ws_subscriptions')).toBe(2);
      expect(open.has('floorcast_ws_backlog_bytes')).toBe(true);
    } finally {
      socket.close();
      await socket.closed();
    }
    await expect.poll(async () => (await read()).value('floorcast_ws_connections')).toBe(0);
  });

  it('serves the process metrics and the job queue, as Prometheus text', async () => {
    const response = await fetch(metricsUrl, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const samples = parsePrometheus(await response.text());
    expect(samples.has('floorcast_nodejs_eventloop_lag_p99_seconds')).toBe(true);
    expect(samples.has('floorcast_nodejs_heap_size_used_bytes')).toBe(true);
    expect(samples.value('floorcast_job_queue_jobs', { state: 'waiting' })).toBe(0);
    // The server driver has a pool to watch; the embedded one has none.
    expect(samples.has('floorcast_database_pool_connections')).toBe(running.gateway.services.storage.kind === 'server');
  });

  it('refuses a scrape without the token, or with a wrong one, with a 401 body like the API', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: TOKEN }] as Record<string, string>[]) {
      const response = await fetch(metricsUrl, { headers });
      expect(response.status).toBe(401);
      expect(await response.json()).toMatchObject({ status: 401, code: 'unauthenticated' });
    }
    expect((await fetch(metricsUrl.replace('/metrics', '/other'), { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
  });

  it('is not served on the API port, and METRICS_PORT=0 serves nothing', async () => {
    expect((await running.client.get('/metrics')).status).toBe(404);
    const off = await startTestGateway({ METRICS_PORT: '0' });
    try {
      expect(off.gateway.metricsPort).toBeUndefined();
    } finally {
      await off.stop();
    }
  });
});

describe('the metrics parser used above', () => {
  it('reads samples with labels and escapes', () => {
    const samples: Samples = parsePrometheus(
      '# HELP a_total x\n# TYPE a_total counter\na_total{type="DANGER",x="a\\"b"} 3\nb 1.5e+2\nc NaN\nd Nan\ne +Inf\n',
    );
    expect(samples.value('a_total', { type: 'DANGER' })).toBe(3);
    expect(samples.value('a_total', { x: 'a"b' })).toBe(3);
    expect(samples.value('b')).toBe(150);
    expect(samples.value('missing')).toBe(0);
    expect(samples.value('d')).toBeNaN();
    expect(samples.value('e')).toBe(Infinity);
    expect(() => parsePrometheus('not a sample line\n')).toThrow();
  });
});
