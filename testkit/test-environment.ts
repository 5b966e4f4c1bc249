import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { loadConfig, type Config } from '../shared/config.js';
import { OrganizationSchema } from '../shared/storage/entities/index.js';
import { openStorage, type Storage } from '../shared/storage/index.js';
import { scratchRoot } from './scratch-dir.js';
import { copyEmbeddedTemplate, serverTemplate } from './storage-template.js';

/**
 * Which drivers this test run uses: the same suite runs embedded (nothing set) and against real servers
 * (`DATABASE_URL` and `REDIS_URL` set, as `.ci/run` does in its second pass).
 */
export const serverDatabaseUrl = process.env.DATABASE_URL || undefined;
export const serverRedisUrl = process.env.REDIS_URL || undefined;
export const driverLabel = `${serverDatabaseUrl ? 'postgres' : 'embedded-postgres'} + ${serverRedisUrl ? 'redis' : 'in-process'}`;

export interface TestEnvironment {
  config: Config;
  /** Environment variables equivalent to `config`, for child processes. */
  env: Record<string, string>;
  cleanup(): Promise<void>;
}

/**
 * FLOORCAST_TEST_TEMPLATES=0 makes every test environment migrate its own empty database instead of copying
 * the migrated template (storage-template.ts): to rule the template out when chasing a failure.
 */
const useTemplates = process.env.FLOORCAST_TEST_TEMPLATES !== '0';

const uniqueSuffix = () => `${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;

/**
 * Creates a database on the server at `baseUrl`, empty or as a copy of database `template`, and returns its URL
 * plus a function that drops it.
 */
export async function createScratchDatabase(baseUrl: string, template?: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `floorcast_test_${uniqueSuffix()}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  await admin.query(template ? `create database ${name} template ${template}` : `create database ${name}`);
  await admin.end();
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: baseUrl });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    },
  };
}

/** Deletes every Redis key under `prefix` (test isolation: each test owns one prefix). */
export async function deleteRedisPrefix(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/** The budgets and caps a test gateway runs with unless a test sets its own (see docs/access.md). */
export const RAISED_LIMITS: Record<string, string> = {
  RATE_LIMIT_REQUESTS_PER_SECOND: '100000',
  RATE_LIMIT_BURST: '200000',
  RATE_LIMIT_POSES_PER_SECOND: '1000000',
  RATE_LIMIT_POSES_BURST: '2000000',
  RATE_LIMIT_USER_REQUESTS_PER_SECOND: '100000',
  RATE_LIMIT_USER_POSES_PER_SECOND: '1000000',
  RATE_LIMIT_ORGANIZATION_POSES_PER_SECOND: '1000000',
  RATE_LIMIT_MAX_REQUESTS_PER_SECOND: '100000',
  RATE_LIMIT_MAX_POSES_PER_SECOND: '1000000',
  MAX_API_KEYS_PER_USER: '1000',
};

/**
 * A private world for one test file: its own DATA_DIR, its own database (server run) and its own Redis
 * prefix, all removed by `cleanup`. The database starts migrated, copied from a template (see
 * storage-template.ts); unless an override says otherwise, DATA_DIR holds a migrated embedded database.
 */
export async function createTestEnvironment(overrides: Record<string, string> = {}): Promise<TestEnvironment> {
  const dataDir = mkdtempSync(join(scratchRoot, 'floorcast-test-'));
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_DIR: dataDir,
    // TEST_LOG_LEVEL=debug shows a test gateway's logs (why a socket closed, say) when chasing a failure.
    LOG_LEVEL: process.env.TEST_LOG_LEVEL || 'silent',
    ADMIN_EMAIL: 'admin@example.test',
    ADMIN_PASSWORD: 'admin-password-1',
    REDIS_PREFIX: `fctest:${uniqueSuffix()}`,
    SHUTDOWN_GRACE_SECONDS: '5',
    // No metrics listener unless a test asks for one (METRICS_PORT=auto): test gateways must not fight over 9464.
    METRICS_PORT: '0',
    WORKER_METRICS_PORT: '0',
    // Tests and benches drive one gateway far harder than one tenant may: they raise every budget and cap
    // explicitly here. The tests of the budgets themselves (rate-limit, authorization matrix) set their own.
    ...RAISED_LIMITS,
  };
  const cleanups: (() => Promise<void>)[] = [async () => rmSync(dataDir, { recursive: true, force: true })];
  if (serverDatabaseUrl) {
    const database = await createScratchDatabase(serverDatabaseUrl, useTemplates ? await serverTemplate(serverDatabaseUrl) : undefined);
    env.DATABASE_URL = database.url;
    cleanups.push(database.drop);
  }
  if (serverRedisUrl) {
    env.REDIS_URL = serverRedisUrl;
    const prefix = env.REDIS_PREFIX!;
    cleanups.push(() => deleteRedisPrefix(serverRedisUrl, prefix));
  }
  Object.assign(env, overrides);
  if (useTemplates && !env.DATABASE_URL && env.DATA_DIR === dataDir) await copyEmbeddedTemplate(dataDir);
  return {
    config: loadConfig(env),
    env,
    cleanup: async () => {
      for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    },
  };
}

/** Storage on a fresh test environment with one organization in it: for tests of the storage-backed modules alone. */
export async function openOrganizationStorage(): Promise<{ storage: Storage; organizationId: string; close(): Promise<void> }> {
  const environment = await createTestEnvironment();
  const storage = await openStorage(environment.config);
  const organizationId = crypto.randomUUID();
  const em = storage.em();
  em.create(OrganizationSchema, { id: organizationId, name: 'o', createdAt: new Date(), updatedAt: new Date() });
  await em.flush();
  return {
    storage,
    organizationId,
    close: async () => {
      await storage.close();
      await environment.cleanup();
    },
  };
}
