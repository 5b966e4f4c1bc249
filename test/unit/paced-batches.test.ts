import { describe, expect, it } from 'vitest';
import { restAfter } from '../../shared/pacing.js';
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

describe('inPacedBatches', () => {
  it('runs every batch to the end, sizing the next from the last one and counting each', async () => {
    const sizes: number[] = [];
    const counted: number[] = [];
    let left = 2000;
    const total = await inPacedBatches(
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
    );
    expect(total).toBe(2000);
    expect(counted.reduce((sum, count) => sum + count, 0)).toBe(2000);
    expect(sizes[0]).toBe(500);
    // A statement far under its time doubles the next, never past the maximum.
    expect(sizes[1]).toBe(800);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(800);
  });

  it("sizes batches towards a few ms of the gateway's thread on embedded storage, and larger on a server", async () => {
    // Every statement takes 12 ms of waiting, whatever its size: a server's round trip and commit.
    const sizesOn = async (kind: 'embedded' | 'server') => {
      const sizes: number[] = [];
      await inPacedBatches({ kind }, 5000, async (size) => {
        sizes.push(size);
        await new Promise((resolve) => setTimeout(resolve, 12));
        return { count: size, more: sizes.length < 6 };
      });
      return sizes;
    };
    const embedded = await sizesOn('embedded');
    const server = await sizesOn('server');
    // Embedded: 12 ms is over 5, so each batch is smaller than the last, down to the minimum.
    expect(embedded.at(-1)).toBeLessThan(embedded[0]!);
    // Server: 12 ms is under 50, so they grow (at most doubling) up to the maximum.
    expect(server.at(-1)).toBeGreaterThan(server[0]!);
    expect(Math.max(...server)).toBeLessThanOrEqual(5000);
  });

  it('rests longer between batches while the thread is kept busy than while it is idle', async () => {
    const batchMs = 5;
    const work = (ms: number) => {
      const until = performance.now() + ms;
      while (performance.now() < until);
    };
    const gaps = async (busy: boolean) => {
      const starts: number[] = [];
      let stop = false;
      // Other work holding the thread 4 ms in every 5, as a flood of uploads would.
      const others = (async () => {
        while (!stop && busy) {
          work(4);
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      })();
      await inPacedBatches({ kind: 'embedded' }, 1000, async () => {
        starts.push(performance.now());
        work(batchMs);
        return { count: 1, more: starts.length < 6 };
      });
      stop = true;
      await others;
      const between = starts.slice(1).map((start, index) => start - starts[index]!);
      return between.reduce((sum, gap) => sum + gap, 0) / between.length;
    };
    const idle = await gaps(false);
    const busy = await gaps(true);
    // Idle: about twice the statement (it rests as long as it worked). Busy: up to twenty times.
    expect(busy).toBeGreaterThan(idle * 3);
  });
});
