import { loadConfigOrExit } from '../shared/config.js';
import { BullmqJobWorker } from '../shared/jobs/bullmq-job-worker.js';
import { createLogger } from '../shared/logger.js';
import { databasePoolSource } from '../shared/metrics/database-pool.js';
import { registerSources } from '../shared/metrics/metrics.js';
import { startMetricsListener } from '../shared/metrics/metrics-server.js';
import { ProcessGuard, SHUTDOWN_MARGIN_MS, boundedStep, describeStartFailure, stopOnSignals } from '../shared/process-guard.js';
import { startReportMaterializer } from '../shared/reports/materializations.js';
import { redisConnections } from '../shared/redis/redis-connections.js';
import { openStorage } from '../shared/storage/index.js';
import { processorsFor } from './processors/index.js';

/** `npm run workers`: consumes the BullMQ job queue (reports, exports) and keeps report data (stays). Needs Redis (REDIS_URL or REDIS_CLUSTER_NODES) and DATABASE_URL. */
async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const redis = redisConnections(config);
  if (!redis) {
    process.stderr.write(
      'REDIS_URL: required by the worker process, or REDIS_CLUSTER_NODES (without Redis, jobs run inside the gateway)\n',
    );
    process.exit(2);
  }
  if (!config.DATABASE_URL) {
    // Embedded PostgreSQL lives in the gateway's process, one writer per DATA_DIR: a worker cannot share it.
    process.stderr.write(
      "DATABASE_URL: required by the worker process (embedded storage is the gateway's alone; without a PostgreSQL server, run without REDIS_URL and jobs run inside the gateway)\n",
    );
    process.exit(2);
  }
  const logger = createLogger(config.LOG_LEVEL, { service: 'worker' });
  ProcessGuard.install({ logger }); // jobs a fatal exit interrupts are retried by BullMQ
  // Before anything connects: a busy port is a start error naming WORKER_METRICS_PORT, with nothing to undo.
  const metrics = await startMetricsListener({
    host: config.METRICS_HOST,
    port: config.WORKER_METRICS_PORT,
    token: config.METRICS_TOKEN,
    logger,
    variable: 'WORKER_METRICS_PORT',
  });
  const storage = await openStorage(config, logger);
  const processors = processorsFor(config);
  const worker = new BullmqJobWorker(redis, config.REDIS_PREFIX, processors, { storage, logger }, config.JOB_CONCURRENCY, logger, {
    aliveTtlMs: config.JOBS_WORKER_TTL_MS,
  });
  await worker.waitUntilReady();
  // Keeps geofence stays as positions arrive; an advisory lock lets one pass run at a time across workers.
  const materializer = startReportMaterializer(storage, config, logger);
  // Job durations and failures (the processors are instrumented), the pool, the process; queue depth comes from gateways.
  registerSources({ databasePool: databasePoolSource(storage) });
  logger.info({ concurrency: config.JOB_CONCURRENCY, processors: Object.keys(processors), metricsPort: metrics?.port }, 'worker ready');

  const graceMs = config.SHUTDOWN_GRACE_SECONDS * 1000;
  stopOnSignals(
    logger,
    'the worker (draining)',
    async () => {
      // The jobs in hand get the grace period; each later step is bounded so a Redis or PostgreSQL that went away holds nothing.
      await boundedStep(logger, 'worker.close', () => worker.close(), graceMs);
      await boundedStep(logger, 'materializer.stop', async () => materializer?.stop(), 2000);
      await boundedStep(logger, 'metrics.close', async () => metrics?.close(), 1000);
      await boundedStep(logger, 'storage.close', () => storage.close(), 2000);
    },
    { deadlineMs: graceMs + SHUTDOWN_MARGIN_MS },
  );
}

main().catch((error) => {
  process.stderr.write(`Floorcast worker failed to start: ${describeStartFailure(error)}\n`);
  process.exit(1);
});
