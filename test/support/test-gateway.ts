import { startGateway, type Gateway, type GatewayOptions } from '../../gateway/app.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
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
  const gateway = await startGateway(config, { ...options, logger: createLogger(config.LOG_LEVEL) });
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
