import { type EventLoopUtilization, performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { restAfter, restAfterWork } from '../../shared/pacing.js';
import { inPacedBatches } from '../../shared/privacy/retention.js';

describe('restAfter: how a paced sweep shares the thread with ingest', () => {
  it('rests at least as long as its statement took, whatever the thread does', () => {
    expect(restAfter(4, 0, 0)).toBe(4);
    expect(restAfter(4, 3, 0)).toBe(1);
    expect(restAfter(4, 1, 1)).toBe(3);
  });

  it('goes on after that rest while the thread was otherwise idle', () => {
    expect(restAfter(4, 4, 0)).toBe(0);
    // Others busy 2 ms of a 6 ms rest: with the next 4 ms statement the thread is busy 6 of 10, over a half.
    expect(restAfter(4, 6, 2)).toBeGreaterThan(0);
    // Others busy 1 ms of 6: 5 of 10.
    expect(restAfter(4, 6, 1)).toBe(0);
  });

  it('keeps resting while uploads keep the thread busy, until its own share is a twentieth', () => {
    // Busy all the time: rest on, in short looks, up to 19 times the statement (a share of 5%).
    expect(restAfter(4, 4, 4)).toBeGreaterThan(0);
    expect(restAfter(4, 40, 40)).toBeGreaterThan(0);
    expect(restAfter(4, 75.5, 75.5)).toBeCloseTo(0.5);
    expect(restAfter(4, 76, 76)).toBe(0);
    // It looks again soon rather than sleeping through the time the thread falls idle.
    expect(restAfter(4, 10, 10)).toBeLessThanOrEqual(2);
  });

  it('keeps a larger share when the caller asks for one (the late queue catching up): no rest past as long as it worked', () => {
    expect(restAfter(4, 4, 4, 0.5)).toBe(0);
    expect(restAfter(4, 3, 3, 0.5)).toBe(1);
    // A tenth: on up to 9 times the statement while the thread is busy.
    expect(restAfter(4, 35, 35, 0.1)).toBeGreaterThan(0);
    expect(restAfter(4, 36, 36, 0.1)).toBe(0);
  });

  it('stops resting as soon as the busy share falls enough', () => {
    // Busy 30 of the first 30 ms, then idle for 16: 30 + 4 of 50.
    expect(restAfter(4, 30, 30)).toBeGreaterThan(0);
    expect(restAfter(4, 46, 30)).toBeGreaterThan(0);
    expect(restAfter(4, 64, 30)).toBe(0);
  });
});

/**
 * Fake time for the pacing: timers, `performance.now()` and the event loop's utilization, the thread busy with other
 * work `busyShare` of the time. Returns a runner that takes work to its end through every rest, with the fake
 * milliseconds it took: what rests and sizes depend on is then exact, not this host's load.
 */
function fakeThread(busyShare = 0) {
  vi.useFakeTimers({ toFake: ['setTimeout', 'Date'] });
  vi.spyOn(performance, 'now').mockImplementation(() => Date.now());
  vi.spyOn(performance, 'eventLoopUtilization').mockImplementation(((since?: EventLoopUtilization) => {
    const active = Date.now() * busyShare;
    const idle = Date.now() - active;
    return since
      ? { active: active - since.active, idle: idle - since.idle, utilization: busyShare }
      : { active, idle, utilization: busyShare };
  }) as typeof performance.eventLoopUtilization);
  return async <T>(work: () => Promise<T>): Promise<{ result: T; ms: number }> => {
    const from = Date.now();
    const running = work();
    await vi.runAllTimersAsync();
    const result = await running;
    return { result, ms: Date.now() - from };
  };
}

/** A statement that takes `ms` of fake time. */
const takes = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('restAfterWork', () => {
  it('rests as long as the work when the thread is idle, on while it is busy, and at most till a twentieth', async () => {
    expect((await fakeThread(0)(() => restAfterWork(5))).ms).toBe(5);
    // Others busy 30% of the rest: the next 5 ms fit once (0.3 r + 5) / (r + 5) <= 0.5, r >= 12.5; looks every 2 ms.
    expect((await fakeThread(0.3)(() => restAfterWork(5))).ms).toBe(13);
    // Busy all the time: 19 times the work, a share of 5%.
    expect((await fakeThread(1)(() => restAfterWork(5))).ms).toBe(95);
    // A caller may keep a larger share under a flood.
    expect((await fakeThread(1)(() => restAfterWork(5, 0.5))).ms).toBe(5);
  });
});

describe('inPacedBatches', () => {
  it('runs every batch to the end, sizing the next from the last one and counting each', async () => {
    const run = fakeThread();
    const sizes: number[] = [];
    const counted: number[] = [];
    let left = 2000;
    const { result: total } = await run(() =>
      inPacedBatches(
        { kind: 'embedded' },
        800,
        async (size) => {
          sizes.push(size);
          const count = Math.min(size, left);
          left -= count;
          return { count, more: left > 0 };
        },
        async (count) => {
          counted.push(count);
        },
      ),
    );
    expect(total).toBe(2000);
    expect(counted).toEqual([500, 800, 700]);
    // A statement far under its time doubles the next, never past the maximum.
    expect(sizes).toEqual([500, 800, 800]);
  });

  it("sizes batches towards a few ms of the gateway's thread on embedded storage, and larger on a server", async () => {
    // Every statement takes 12 ms, whatever its size: a server's round trip and commit.
    const sizesOn = async (kind: 'embedded' | 'server') => {
      const sizes: number[] = [];
      await fakeThread()(() =>
        inPacedBatches({ kind }, 5000, async (size) => {
          sizes.push(size);
          await takes(12);
          return { count: size, more: sizes.length < 6 };
        }),
      );
      vi.useRealTimers();
      vi.restoreAllMocks();
      return sizes;
    };
    // Embedded: towards 5 ms, down to the minimum of 50 rows.
    expect(await sizesOn('embedded')).toEqual([500, 208, 87, 50, 50, 50]);
    // Server: towards 50 ms, at most doubling, up to the maximum.
    expect(await sizesOn('server')).toEqual([500, 1000, 2000, 4000, 5000, 5000]);
  });

  it('rests between batches as long as each took while the thread is idle, and 19 times as long while it is busy', async () => {
    const gaps = async (busyShare: number) => {
      const starts: number[] = [];
      await fakeThread(busyShare)(() =>
        inPacedBatches({ kind: 'embedded' }, 1000, async () => {
          starts.push(Date.now());
          await takes(5);
          return { count: 1, more: starts.length < 4 };
        }),
      );
      vi.useRealTimers();
      vi.restoreAllMocks();
      return starts.slice(1).map((start, index) => start - starts[index]!);
    };
    expect(await gaps(0)).toEqual([10, 10, 10]);
    expect(await gaps(1)).toEqual([100, 100, 100]);
  });
});
