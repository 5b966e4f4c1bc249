import type { Worker } from 'bullmq';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BullmqJobQueue } from '../../shared/jobs/bullmq-job-queue.js';
import { BullmqJobWorker, STUCK_BEATS, watchdogStep } from '../../shared/jobs/bullmq-job-worker.js';
import type { ProcessorRegistry } from '../../shared/jobs/index.js';
import { createLogger } from '../../shared/logger.js';
import type { Storage } from '../../shared/storage/index.js';
import { redisServer } from '../../testkit/redis-cluster.js';
import { deleteRedisPrefix, serverRedisUrl } from '../../testkit/test-environment.js';

/**
 * The worker's watchdog: a BullMQ worker can stop consuming without a word (after a Redis restart, it is not
 * running, or runs but never hears of new jobs). The decision is pure and tested with hand-made looks; with
 * Redis (the server pass), a worker stopped by hand inside ours is replaced and the job waiting is served.
 */
const logger = createLogger('silent');
const processors: ProcessorRegistry = { add: async (data: { a: number; b: number }) => ({ sum: data.a + data.b }) };

describe('the watchdog decision', () => {
  const look = { running: true, ready: 0, active: 0, concurrency: 2, stuckBeats: 0 };

  it('replaces a worker that is not running, whatever the queue', () => {
    expect(watchdogStep({ ...look, running: false })).toEqual({ stuckBeats: 0, replace: true });
  });

  it(`replaces a worker with room that took none of the ready jobs for ${STUCK_BEATS} beats in a row`, () => {
    let stuckBeats = 0;
    const verdicts: boolean[] = [];
    for (let beat = 0; beat < STUCK_BEATS; beat++) {
      const step = watchdogStep({ ...look, ready: 4, active: 1, stuckBeats });
      stuckBeats = step.stuckBeats;
      verdicts.push(step.replace);
    }
    expect(verdicts).toEqual([...Array(STUCK_BEATS - 1).fill(false), true]);
  });

  it('counts again from zero when the queue empties or the worker is full', () => {
    expect(watchdogStep({ ...look, ready: 0, stuckBeats: STUCK_BEATS - 1 })).toEqual({ stuckBeats: 0, replace: false });
    expect(watchdogStep({ ...look, ready: 9, active: 2, stuckBeats: STUCK_BEATS - 1 })).toEqual({ stuckBeats: 0, replace: false });
  });
});

describe.runIf(serverRedisUrl)('the job worker watchdog', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup() {
    const prefix = `fctest:watchdog:${Math.random().toString(36).slice(2)}`;
    const queue = new BullmqJobQueue(redisServer(serverRedisUrl!), prefix, logger);
    const worker = new BullmqJobWorker(redisServer(serverRedisUrl!), prefix, processors, { storage: {} as Storage, logger }, 1, logger, {
      aliveTtlMs: 600,
    });
    cleanups.push(async () => {
      await worker.close();
      await queue.close();
      await deleteRedisPrefix(serverRedisUrl!, prefix);
    });
    await worker.waitUntilReady();
    /** The BullMQ worker inside ours, as it is now. */
    const inner = () => (worker as unknown as { worker: Worker }).worker;
    return { queue, worker, inner };
  }

  it('replaces a worker found not running, and the job waiting for it is served', async () => {
    const { queue, worker, inner } = await setup();
    const stopped = inner();
    await stopped.close(true);
    await vi.waitFor(() => expect(stopped.isRunning()).toBe(false), { timeout: 10_000 });
    await expect(queue.run({ name: 'add', organizationId: 'org', data: { a: 2, b: 3 } }, 15_000)).resolves.toEqual({ sum: 5 });
    expect(worker.restarts).toBe(1);
    expect(inner()).not.toBe(stopped);
    expect(inner().isRunning()).toBe(true);
  });

  it('leaves a healthy worker alone', async () => {
    const { queue, worker } = await setup();
    for (let i = 0; i < 5; i++)
      await expect(queue.run({ name: 'add', organizationId: 'org', data: { a: i, b: 1 } }, 15_000)).resolves.toEqual({ sum: i + 1 });
    await new Promise((resolve) => setTimeout(resolve, 1000)); // a few beats
    expect(worker.restarts).toBe(0);
  });
});
