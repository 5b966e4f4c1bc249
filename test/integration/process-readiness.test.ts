import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../gateway/app.js';
import { BullmqJobWorker } from '../../shared/jobs/bullmq-job-worker.js';
import { createLogger } from '../../shared/logger.js';
import { processorsFor } from '../../workers/processors/index.js';
import { createVenue } from '../../testkit/cartography.js';
import { TestClient } from '../../testkit/http-client.js';
import { adminClient } from '../../testkit/identity.js';
import { redisServer } from '../../testkit/redis-cluster.js';
import { createTestEnvironment, driverLabel, serverRedisUrl, type TestEnvironment } from '../../testkit/test-environment.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Readiness tells the truth, and says nothing of the infrastructure: a driver's error (hosts, ports) stays in the
 * log; with jobs on BullMQ, no live worker means `jobs` not ready and job-backed requests refused at once.
 * The gateway is started without the test worker startTestGateway would add, so this file decides when one runs.
 */
describe(`readiness and job workers (${driverLabel})`, () => {
  let environment: TestEnvironment;
  let gateway: Gateway;
  let client: TestClient;
  const logged: string[] = [];

  beforeAll(async () => {
    environment = await createTestEnvironment({ JOBS_WORKER_TTL_MS: '900', LOG_LEVEL: 'warn' });
    const logger = pino({ level: 'warn' }, { write: (line: string) => void logged.push(line) });
    gateway = await startGateway(environment.config, { logger });
    client = new TestClient(`http://127.0.0.1:${gateway.port}`);
  }, 60_000);
  afterAll(async () => {
    await gateway?.close();
    await environment?.cleanup();
  });

  it('shows a generic state for a driver failure and logs the detail', async () => {
    const storage = gateway.services.storage;
    const ping = storage.ping.bind(storage);
    storage.ping = async () => {
      throw new Error('connect ECONNREFUSED 10.20.30.40:5432');
    };
    try {
      const response = await client.get('/readyz');
      expect(response.status).toBe(503);
      expect(response.body.checks.storage).toBe('unreachable');
      expect(response.text).not.toContain('10.20.30.40');
      expect(response.text).not.toContain('ECONNREFUSED');
      expect(logged.join('')).toContain('10.20.30.40:5432');
    } finally {
      storage.ping = ping;
    }
  });

  it.runIf(serverRedisUrl)(
    'with no worker alive: jobs not ready (readiness degraded, not failing) and reports 503 with Retry-After at once; a worker makes both work, its death undoes it',
    async () => {
      const admin = await adminClient(client);
      const venue = await createVenue(admin, 'Readiness venue');
      const report = () =>
        admin.get(
          `/api/v1/reports/visitors.json?building_id=${venue.building.id}&from_date=2026-01-01T00:00:00Z&to_date=2026-01-02T00:00:00Z`,
        );
      const expectRefused = async () => {
        const ready = await client.get('/readyz');
        // Degraded, not failing: uploads and alarms go on, so a load balancer keeps the gateway.
        expect(ready.status).toBe(200);
        expect(ready.body.status).toBe('degraded');
        expect(ready.body.checks).toMatchObject({ storage: 'ok', bus: 'ok' });
        expect(ready.body.checks.jobs).toMatch(/no job worker/i);
        const refused = await report();
        expect(refused.status, refused.text).toBe(503);
        expect(refused.body).toMatchObject({ status: 503, code: 'unavailable' });
        expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
      };
      await expectRefused();

      const logger = createLogger('silent');
      const worker = new BullmqJobWorker(
        redisServer(environment.config.REDIS_URL!),
        environment.config.REDIS_PREFIX,
        processorsFor(environment.config),
        { storage: gateway.services.storage, logger },
        1,
        logger,
        { aliveTtlMs: 900 },
      );
      try {
        await worker.waitUntilReady();
        expect((await client.get('/readyz')).body).toEqual({ status: 'ok', checks: { storage: 'ok', bus: 'ok', jobs: 'ok' } });
        const served = await report();
        expect(served.status, served.text).toBe(200);
        expect(Array.isArray(served.body.data)).toBe(true);
      } finally {
        await worker.close();
      }
      // The key lapses JOBS_WORKER_TTL_MS after the last renewal: refused again, without waiting for a job timeout.
      await sleep(1200);
      await expectRefused();
    },
    60_000,
  );
});
