import { startGateway, type Gateway, type GatewayOptions } from '../gateway/app.js';
import { loadConfig } from '../shared/config.js';
import { createLogger } from '../shared/logger.js';
import { BullmqJobWorker } from '../shared/jobs/bullmq-job-worker.js';
import { redisConnections } from '../shared/redis/redis-connections.js';
import { processorsFor } from '../workers/processors/index.js';
import { TestClient } from './http-client.js';
import { createTestEnvironment, type TestEnvironment } from './test-environment.js';

export interface RunningGateway {
  gateway: Gateway;
  environment: TestEnvironment;
  client: TestClient;
  baseUrl: string;
  /** Stops the gateway (as SIGTERM would) but keeps its data, so it can be started again. */
  restart(): Promise<RunningGateway>;
  /** Stops the gateway and removes its database, data directory and Redis keys. */
  stop(): Promise<void>;
}

/** Boots the real gateway in-process on a free port against this run's drivers. */
export async function startTestGateway(
  overrides: Record<string, string> = {},
  options: Omit<GatewayOptions, 'logger'> = {},
  environment?: TestEnvironment,
): Promise<RunningGateway> {
  const env = environment ?? (await createTestEnvironment(overrides));
  const config = environment ? loadConfig({ ...env.env, ...overrides }) : env.config;
  const logger = createLogger(config.LOG_LEVEL);
  const gateway = await startGateway(config, { ...options, logger });
  // With Redis, jobs go to BullMQ: run a worker as `npm run workers` would, on the same storage.
  const redis = redisConnections(config);
  const worker = redis
    ? new BullmqJobWorker(
        redis,
        config.REDIS_PREFIX,
        processorsFor(config),
        { storage: gateway.services.storage, logger },
        config.JOB_CONCURRENCY,
        logger,
        { aliveTtlMs: config.JOBS_WORKER_TTL_MS },
      )
    : undefined;
  await worker?.waitUntilReady();
  const close = gateway.close;
  gateway.close = async () => {
    await worker?.close();
    await close();
  };
  const baseUrl = `http://127.0.0.1:${gateway.port}`;
  return {
    gateway,
    environment: env,
    client: new TestClient(baseUrl),
    baseUrl,
    restart: async () => {
      await gateway.close();
      return startTestGateway(overrides, options, env);
    },
    stop: async () => {
      await gateway.close();
      await env.cleanup();
    },
  };
}
