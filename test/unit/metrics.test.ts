import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { LivePosition, TopicPositions } from '../../gateway/ws/position-frames.js';
import { Connection, type SocketLike } from '../../gateway/ws/ws-connection.js';
import { createLogger } from '../../shared/logger.js';
import { instrumentProcessors } from '../../shared/metrics/job-metrics.js';
import { startMetricsListener } from '../../shared/metrics/metrics-server.js';
import { collectProcessMetrics, registerSources, registry } from '../../shared/metrics/metrics.js';
import { loadConfig } from '../../shared/config.js';
import { processorsFor } from '../../workers/processors/index.js';
import { parsePrometheus, scrape } from '../../testkit/prometheus.js';

const processors = processorsFor(loadConfig({}));

const logger = createLogger('silent');
const context = { storage: undefined as never, logger };
const limits = { deadline: Date.now() + 60_000, signal: new AbortController().signal };

/** A listener on a free port for the length of `body`. */
async function withListener(token: string | undefined, body: (url: string) => Promise<void>): Promise<void> {
  const listener = (await startMetricsListener({ host: '127.0.0.1', port: 'auto', token, logger }))!;
  try {
    await body(`http://127.0.0.1:${listener.port}/metrics`);
  } finally {
    await listener.close();
  }
}

describe("a worker's metrics", () => {
  it('times every job and counts its failures, by job and report, as the worker process serves them', async () => {
    const instrumented = instrumentProcessors(
      {
        report: async (data: { fail?: boolean }) => {
          if (data.fail) throw new Error('boom');
          return 'ok';
        },
        other: async () => null,
      },
      (name, data) => (name === 'report' ? (data as { report?: string }).report : undefined),
    );
    await withListener(undefined, async (url) => {
      const before = await scrape(url);
      await instrumented.report!({ report: 'visits' }, context, limits);
      await expect(instrumented.report!({ report: 'visits', fail: true }, context, limits)).rejects.toThrow('boom');
      await instrumented.other!({}, context, limits);
      const after = await scrape(url);
      const moved = (name: string, labels: Record<string, string>) => after.value(name, labels) - before.value(name, labels);
      expect(moved('floorcast_job_duration_seconds_count', { job: 'report', report: 'visits' })).toBe(2);
      expect(moved('floorcast_job_failures_total', { job: 'report', report: 'visits' })).toBe(1);
      expect(moved('floorcast_job_duration_seconds_count', { job: 'other', report: 'none' })).toBe(1);
      expect(moved('floorcast_job_failures_total', { job: 'other', report: 'none' })).toBe(0);
    });
  });

  it('labels a report job by its report only when it is one we know (labels stay bounded)', async () => {
    await withListener(undefined, async (url) => {
      const before = await scrape(url);
      // Refused by the processor for its parameters: still a timed, failed run of a known report.
      await expect(processors.report!({ report: 'visitors', params: {} }, context, limits)).rejects.toThrow();
      await expect(processors.report!({ report: 'made-up', params: {} }, context, limits)).rejects.toThrow();
      const after = await scrape(url);
      expect(
        after.value('floorcast_job_failures_total', { job: 'report', report: 'visitors' }) -
          before.value('floorcast_job_failures_total', { job: 'report', report: 'visitors' }),
      ).toBe(1);
      expect(
        after.value('floorcast_job_failures_total', { job: 'report', report: 'none' }) -
          before.value('floorcast_job_failures_total', { job: 'report', report: 'none' }),
      ).toBe(1);
      expect(after.samples.some((sample) => sample.labels.report === 'made-up')).toBe(false);
    });
  });

  it('reads the registered sources at scrape time, and forgets them when unregistered', async () => {
    await withListener(undefined, async (url) => {
      // Nobody here can tell the queue's depth (as on a worker): absent, not a misleading 0.
      expect((await scrape(url)).has('floorcast_job_queue_jobs')).toBe(false);
      let used = 3;
      const unregister = registerSources({
        databasePool: () => ({ used, pending: 1, free: 6 }),
        maps: () => ({ probe: 42 }),
        jobs: async () => ({ waiting: 4, active: 1 }),
      });
      expect((await scrape(url)).value('floorcast_database_pool_connections', { state: 'used' })).toBe(3);
      used = 7;
      const samples = await scrape(url);
      expect(samples.value('floorcast_database_pool_connections', { state: 'used' })).toBe(7);
      expect(samples.value('floorcast_database_pool_connections', { state: 'pending' })).toBe(1);
      expect(samples.value('floorcast_map_entries', { map: 'probe' })).toBe(42);
      expect(samples.value('floorcast_job_queue_jobs', { state: 'waiting' })).toBe(4);
      unregister();
      expect((await scrape(url)).has('floorcast_database_pool_connections')).toBe(false);
    });
  });
});

describe('the metrics listener', () => {
  it('asks for the token when one is set, and answers nothing but GET /metrics', async () => {
    await withListener('a-metrics-token-0123456789', async (url) => {
      const refused = await fetch(url);
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toBe('Bearer');
      expect((await fetch(url, { headers: { authorization: 'Bearer a-metrics-token-012345678' } })).status).toBe(401);
      const ok = await fetch(url, { headers: { authorization: 'Bearer a-metrics-token-0123456789' } });
      expect(ok.status).toBe(200);
      expect(parsePrometheus(await ok.text()).has('floorcast_positions_accepted_total')).toBe(true);
      expect((await fetch(url, { method: 'POST', headers: { authorization: 'Bearer a-metrics-token-0123456789' } })).status).toBe(405);
    });
  });

  it('is off at port 0, and a port it cannot bind fails naming METRICS_PORT', async () => {
    expect(await startMetricsListener({ host: '127.0.0.1', port: 0, logger })).toBeUndefined();
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as { port: number }).port;
      await expect(startMetricsListener({ host: '127.0.0.1', port, logger })).rejects.toThrow(
        /^METRICS_PORT: 127\.0\.0\.1:\d+ is in use \(another Floorcast may be running on this host\)/,
      );
    } finally {
      taken.close();
    }
  });
});

describe('WebSocket metrics', () => {
  const socket = (): SocketLike & { buffered: number } => ({
    buffered: 0,
    getBufferedAmount() {
      return this.buffered;
    },
    send: () => 1,
    cork: (callback) => void callback(),
    end: () => undefined,
  });
  const record = (device: string, n: number) => ({
    organizationId: 'org',
    deviceId: device,
    userId: null,
    buildingId: 1,
    floorId: 2,
    indoor: true,
    x: n,
    y: 0,
    lat: 40,
    lng: -3,
    yaw: 0,
    accuracy: null,
    timestamp: n,
    receivedAt: n,
  });
  const batch = (...positions: [string, number][]) =>
    new TopicPositions(
      'buildings/1/positions',
      positions.map(([device, n]) => new LivePosition(record(device, n), null)),
    );

  it('counts the frames coalesced away and the slow consumers disconnected', async () => {
    await withListener(undefined, async (url) => {
      const before = await scrape(url);
      const ws = socket();
      const connection = new Connection(ws, 'json', { coalesceBytes: 1000, maxBufferBytes: 5000 });
      ws.buffered = 2000;
      // a:1 is replaced by a:2, a:2 by a:3, b:1 waits alone: two frames never sent.
      connection.sendPositions([batch(['a', 1], ['b', 1], ['a', 2])]);
      connection.sendPositions([batch(['a', 3])]);
      ws.buffered = 6000;
      connection.send('alarm');
      connection.send('alarm'); // already closed: one disconnect
      const after = await scrape(url);
      expect(after.value('floorcast_ws_coalesced_positions_total') - before.value('floorcast_ws_coalesced_positions_total')).toBe(2);
      expect(
        after.value('floorcast_ws_slow_consumer_disconnects_total') - before.value('floorcast_ws_slow_consumer_disconnects_total'),
      ).toBe(1);
    });
  });
});

describe('the Grafana dashboard', () => {
  it('queries only metrics the registry declares', async () => {
    collectProcessMetrics();
    const declared = new Set((await registry.getMetricsAsJSON()).map((metric) => metric.name));
    const dashboard = readFileSync(new URL('../../docs/grafana-dashboard.json', import.meta.url), 'utf8');
    const used = new Set([...dashboard.matchAll(/floorcast_[a-z0-9_]+/g)].map(([name]) => name.replace(/_(bucket|sum|count)$/, '')));
    expect(used.size).toBeGreaterThan(10);
    expect([...used].filter((name) => !declared.has(name))).toEqual([]);
  });
});
