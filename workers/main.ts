import { loadConfigOrExit } from '../shared/config.js';
import { BullmqJobWorker } from '../shared/jobs/bullmq-job-worker.js';
import { createLogger } from '../shared/logger.js';
import { databasePoolSource } from '../shared/metrics/database-pool.js';
import { registerSources } from '../shared/metrics/metrics.js';
import { startMetricsListener } from '../shared/metrics/metrics-server.js';
import { ProcessGuard, stopOnSignals } from '../shared/process-guard.js';
import { startReportMaterializer } from '../shared/reports/materializations.js';
import { openStorage } from '../shared/storage/index.js';
import { processorsFor } from './processors/index.js';

/** `npm run workers`: consumes the BullMQ job queue (reports, exports) and keeps report data (stays). Needs REDIS_URL. */
async function main(): Promise<void> {
  const config = loadConfigOrExit();
  if (!config.REDIS_URL) {
    process.stderr.write('REDIS_URL: required by the worker process (without Redis, jobs run inside the gateway)\n');
    process.exit(2);
  }
  const logger = createLogger(config.LOG_LEVEL, { service: 'worker' });
  ProcessGuard.install({ logger }); // jobs a fatal exit interrupts are retried by BullMQ
  const storage = await openStorage(config, logger);
  const processors = processorsFor(config);
  const worker = new BullmqJobWorker(config.REDIS_URL, config.REDIS_PREFIX, processors, { storage, logger }, config.JOB_CONCURRENCY, logger);
  await worker.waitUntilReady();
  // Keeps geofence stays as positions arrive; an advisory lock lets one pass run at a time across workers.
  const materializer = startReportMaterializer(storage, config, logger);
  // Job durations and failures (the processors are instrumented), the pool, the process; queue depth comes from gateways.
  registerSources({ databasePool: databasePoolSource(storage) });
  const metrics = await startMetricsListener({ host: config.METRICS_HOST, port: config.METRICS_PORT, token: config.METRICS_TOKEN, logger });
  logger.info({ concurrency: config.JOB_CONCURRENCY, processors: Object.keys(processors) }, 'worker ready');

  stopOnSignals(logger, 'the worker (draining)', async () => {
    await worker.close();
    await materializer?.stop();
    await metrics?.close();
    await storage.close();
  });
}

main().catch((error) => {
  process.stderr.write(`Floorcast worker failed to start: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exit(1);
});
