import { afterEach, describe, expect, it } from 'vitest';
import { AppError, ErrorCode, ValidationError } from '../../shared/errors.js';
import { BullmqJobQueue } from '../../shared/jobs/bullmq-job-queue.js';
import { BullmqJobWorker } from '../../shared/jobs/bullmq-job-worker.js';
import { RedisBus } from '../../shared/bus/redis-bus.js';
import type { JobQueue, ProcessorRegistry } from '../../shared/jobs/index.js';
import { LocalJobQueue } from '../../shared/jobs/local-job-queue.js';
import { createLogger } from '../../shared/logger.js';
import type { Storage } from '../../shared/storage/index.js';
import { FaultRedis, freePort } from '../../testkit/fault-servers.js';
import type { RedisConnections } from '../../shared/redis/redis-connections.js';
import { redisClusterOfThisFile, redisServer } from '../../testkit/redis-cluster.js';
import { deleteRedisPrefix, serverRedisUrl } from '../../testkit/test-environment.js';

/** A hang guard for a job's answer, not a timing: a Redis Cluster's first job on a loaded host took over 10 s once in CI. */
const RUN_TIMEOUT_MS = 30_000;

const logger = createLogger('silent');
const context = { storage: {} as Storage, logger };
const order: string[] = [];
/** Labels of `watch` jobs whose processor saw its limits' signal fire, with the reason's code. */
const aborted = new Map<string, string>();
/** Labels of `note` jobs, with when they ran. */
const noted = new Map<string, number>();

const processors: ProcessorRegistry = {
  // Scheduled jobs: nobody waits for them; a processor may schedule a follow-up (webhook retries do).
  note: async (data: { label: string; then?: string }, context) => {
    noted.set(data.label, Date.now());
    if (data.then) await context.schedule!({ name: 'note', organizationId: 'org-a', data: { label: data.then } }, { delayMs: 50 });
    return null;
  },
  add: async (data: { a: number; b: number }) => ({ sum: data.a + data.b }),
  invalid: async () => {
    throw new ValidationError([{ field: 'from_date', message: 'required' }]);
  },
  crash: async () => {
    throw new Error('secret internal detail');
  },
  slow: async (data: { ms: number }) => {
    await new Promise((resolve) => setTimeout(resolve, data.ms));
    return 'late';
  },
  watch: async (data: { label: string }, _context, limits) => {
    const reason = await new Promise<unknown>((resolve) =>
      limits.signal.addEventListener('abort', () => resolve(limits.signal.reason), { once: true }),
    );
    aborted.set(data.label, (reason as AppError).code);
    return 'never read';
  },
  deadline: async (_data, _context, limits) => ({ inFuture: limits.deadline > Date.now(), signalled: limits.signal.aborted }),
  record: async (data: { label: string; ms?: number }) => {
    await new Promise((resolve) => setTimeout(resolve, data.ms ?? 20));
    order.push(data.label);
    return data.label;
  },
};

interface QueueFactory {
  name: string;
  create(concurrency: number): Promise<{ queue: JobQueue; cleanup(): Promise<void> }>;
}

const factories: QueueFactory[] = [
  {
    name: 'in-process',
    create: async (concurrency) => {
      const queue = new LocalJobQueue(processors, context, concurrency);
      return { queue, cleanup: () => queue.close() };
    },
  },
];
/** BullMQ, a producer and a worker with a prefix of their own, on `connections`; `clean` removes the prefix's keys. */
const bullmq = (name: string, connections: () => RedisConnections, clean: (prefix: string) => Promise<void>): QueueFactory => ({
  name,
  create: async (concurrency) => {
    const prefix = `fctest:jobs:${Math.random().toString(36).slice(2)}`;
    const queue = new BullmqJobQueue(connections(), prefix, logger);
    const worker = new BullmqJobWorker(connections(), prefix, processors, context, concurrency, logger);
    await worker.waitUntilReady();
    return {
      queue,
      cleanup: async () => {
        await worker.close();
        await queue.close();
        await clean(prefix);
      },
    };
  },
});
const redisUrl = serverRedisUrl;
if (redisUrl)
  factories.push(
    bullmq(
      'bullmq',
      () => redisServer(redisUrl),
      (prefix) => deleteRedisPrefix(redisUrl, prefix),
    ),
  );
/** A three-master Redis Cluster of this file's own (BullMQ's keys under one hash tag), whatever drivers the run selects. */
const cluster = redisClusterOfThisFile();
if (cluster)
  factories.push(
    bullmq(
      'bullmq on redis-cluster',
      () => cluster().connections,
      async () => undefined,
    ),
  );

describe.each(factories)('job queue contract: $name', (factory) => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await cleanup?.();
    cleanup = undefined;
  });

  it('runs a job and returns its result', async () => {
    const { queue, cleanup: c } = await factory.create(2);
    cleanup = c;
    await expect(queue.run({ name: 'add', organizationId: 'org-a', data: { a: 2, b: 3 } }, RUN_TIMEOUT_MS)).resolves.toEqual({ sum: 5 });
  });

  it('hands a processor AppError to the caller with its code and field errors', async () => {
    const { queue, cleanup: c } = await factory.create(1);
    cleanup = c;
    const error = (await queue
      .run({ name: 'invalid', organizationId: 'org-a', data: {} }, RUN_TIMEOUT_MS)
      .catch((e: unknown) => e)) as AppError;
    expect(error).toBeInstanceOf(AppError);
    expect(error.code).toBe(ErrorCode.ValidationFailed);
    expect(error.errors).toEqual([{ field: 'from_date', message: 'required' }]);
  });

  it('turns an unexpected processor failure into an internal error without leaking its message', async () => {
    const { queue, cleanup: c } = await factory.create(1);
    cleanup = c;
    const error = (await queue
      .run({ name: 'crash', organizationId: 'org-a', data: {} }, RUN_TIMEOUT_MS)
      .catch((e: unknown) => e)) as AppError;
    expect(error).toBeInstanceOf(AppError);
    expect(error.code).toBe(ErrorCode.Internal);
    expect(error.message).not.toContain('secret');
  });

  it('gives up with a timeout error when the job takes too long', async () => {
    const { queue, cleanup: c } = await factory.create(1);
    cleanup = c;
    const error = (await queue
      .run({ name: 'slow', organizationId: 'org-a', data: { ms: 3000 } }, 300)
      .catch((e: unknown) => e)) as AppError;
    expect(error).toBeInstanceOf(AppError);
    expect(error.code).toBe(ErrorCode.Timeout);
    expect(error.status).toBe(504);
  });

  it('runs a scheduled job after its delay, and lets its processor schedule a follow-up', async () => {
    const { queue, cleanup: c } = await factory.create(1);
    cleanup = c;
    const label = `note-${Math.random()}`;
    const scheduledAt = Date.now();
    // biome-ignore lint/suspicious/noThenProperty: a job's data field named `then`, never awaited
    await queue.schedule({ name: 'note', organizationId: 'org-a', data: { label, then: `${label}-next` } }, { delayMs: 300 });
    expect(noted.has(label)).toBe(false);
    await expect.poll(() => noted.get(`${label}-next`), { timeout: 5000 }).toBeDefined();
    expect(noted.get(label)! - scheduledAt).toBeGreaterThanOrEqual(290);
    expect(noted.get(`${label}-next`)!).toBeGreaterThanOrEqual(noted.get(label)! + 40);
  });

  it('tells the processor when its caller gave up, so it can cancel its work (reports cancel their SQL)', async () => {
    const { queue, cleanup: c } = await factory.create(1);
    cleanup = c;
    const label = `watch-${Math.random()}`;
    const error = (await queue.run({ name: 'watch', organizationId: 'org-a', data: { label } }, 400).catch((e: unknown) => e)) as AppError;
    expect(error.code).toBe(ErrorCode.Timeout);
    await expect.poll(() => aborted.get(label)).toBe(ErrorCode.Timeout);
  });

  it('gives the processor a deadline ahead of it and a signal not yet raised', async () => {
    const { queue, cleanup: c } = await factory.create(1);
    cleanup = c;
    await expect(queue.run({ name: 'deadline', organizationId: 'org-a', data: {} }, 10_000)).resolves.toEqual({
      inFuture: true,
      signalled: false,
    });
  });

  it('answers ping', async () => {
    const { queue, cleanup: c } = await factory.create(1);
    cleanup = c;
    await expect(queue.ping()).resolves.toBeUndefined();
  });
});

describe.each(factories)('job queue fairness: $name', (factory) => {
  it('serves organizations in turn, so a burst from one does not starve another', async () => {
    order.length = 0;
    const { queue, cleanup } = await factory.create(1);
    try {
      // Each job of the burst outlasts the enqueueing of the whole burst and of the quiet job.
      const busy = Array.from({ length: 5 }, (_, i) =>
        queue.run({ name: 'record', organizationId: 'busy', data: { label: `busy-${i}`, ms: 300 } }, 20_000),
      );
      await new Promise((resolve) => setTimeout(resolve, 100)); // the burst is queued first
      const quiet = queue.run({ name: 'record', organizationId: 'quiet', data: { label: 'quiet-0' } }, 20_000);
      await Promise.all([...busy, quiet]);
      // The quiet organization's only job runs right after the burst's first, not after all of them.
      expect(order.indexOf('quiet-0')).toBeLessThanOrEqual(1);
      expect(order).toHaveLength(6);
    } finally {
      await cleanup();
    }
  });
});

/** Redis down: a job-backed request answers 503 with Retry-After instead of hanging. Its own Redis, never the shared one. */
describe('BullMQ job queue with Redis down', () => {
  const unavailable = (error: unknown) => {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).status).toBe(503);
    expect((error as AppError).headers?.['retry-after']).toMatch(/^\d+$/);
  };

  it('refuses with 503 once the connection is lost, and works again when Redis is back', async () => {
    const redis = await FaultRedis.start();
    const queue = new BullmqJobQueue(redisServer(redis.url), 'fctest:jobs-outage', logger, 500);
    const worker = new BullmqJobWorker(redisServer(redis.url), 'fctest:jobs-outage', processors, context, 1, logger);
    try {
      await worker.waitUntilReady();
      await expect(queue.run({ name: 'add', organizationId: 'org-a', data: { a: 1, b: 1 } }, 10_000)).resolves.toEqual({ sum: 2 });
      await redis.stop();
      unavailable(await queue.run({ name: 'add', organizationId: 'org-a', data: { a: 1, b: 2 } }, 10_000).catch((e: unknown) => e));
      await expect(queue.ping()).rejects.toThrow(/unreachable/); // /readyz answers at once too
      await redis.resume();
      await expect
        .poll(() => queue.run({ name: 'add', organizationId: 'org-a', data: { a: 2, b: 2 } }, 10_000).catch(() => 'not yet'), {
          timeout: 15_000,
          interval: 200,
        })
        .toEqual({ sum: 4 });
    } finally {
      await worker.close();
      await queue.close();
      await redis.stop();
    }
  });

  it('a worker, a queue and a bus close after Redis restarted under them (BullMQ alone would wait for ever)', async () => {
    const redis = await FaultRedis.start();
    const worker = new BullmqJobWorker(redisServer(redis.url), 'fctest:jobs-restart', processors, context, 1, logger);
    const queue = new BullmqJobQueue(redisServer(redis.url), 'fctest:jobs-restart', logger);
    const bus = new RedisBus(redisServer(redis.url), 'fctest:jobs-restart', logger);
    try {
      await worker.waitUntilReady();
      await bus.ping();
      await redis.stop();
      await redis.resume();
      await Promise.all([worker.close(), queue.close(), bus.close()]);
    } finally {
      await redis.stop();
    }
  });

  it('refuses with 503 within the enqueue timeout when Redis never answered', async () => {
    const queue = new BullmqJobQueue(redisServer(`redis://127.0.0.1:${await freePort()}`), 'fctest:jobs-never', logger, 300);
    try {
      unavailable(await queue.run({ name: 'add', organizationId: 'org-a', data: { a: 1, b: 1 } }, 60_000).catch((e: unknown) => e));
    } finally {
      await queue.close();
    }
  });
});
