import { performance } from 'node:perf_hooks';

/**
 * How background work shares the gateway's thread with ingest (issue 32's expiry and erasure, on both drivers;
 * issue 30's late replays, on embedded storage). On embedded storage PGlite runs in the gateway's own thread: an
 * upload waits for the statement in hand, and every statement of background work is thread time taken from
 * uploads; on a server the database shares the machine's cores. So after each piece of work the
 * background rests (`restAfter`): at least as long as it worked, then on while the thread is busy with other work,
 * until its next piece would fit in what the rest left idle, or its share of the time has fallen to MIN_SHARE. With
 * the process otherwise idle it takes half the time; under a flood of uploads that keeps the thread busy, a
 * twentieth. At half the time whatever the load, uploads that kept the thread busy got up to 44% fewer through, with
 * their median up to doubled (bench/README.md, erasure).
 */
const DUTY = 0.5;
/**
 * On embedded storage, how long one statement or commit should hold PGlite, and with it the gateway's thread: an
 * upload waits for the one in hand (the sweeps' batches, shared/privacy/retention.ts, and the group commit while
 * organizations share it, position-writer.ts). At 15 ms the others' p99 beside a million-row erasure was 1.9-2.9
 * times its value without, at 5 ms 1.4-1.6 (bench/README.md, erasure).
 */
export const EMBEDDED_HOLD_MS = 5;
const MIN_SHARE = 0.05;
/** The thread's busy share, the background's next piece included, up to which the background goes on. */
const FILL_TO = 0.5;
/** While the thread is busy with other work, how often the resting background looks again. */
const LOOK_MS = 2;

/**
 * How much longer background work rests, `rested` ms after a piece that took `took` ms, the thread having been
 * busy with other work `othersMs` of those: at least as long as it worked; then on while the next piece (about as
 * long) would take the thread's busy share past FILL_TO, until the background's own share is `minShare`
 * (MIN_SHARE unless given). 0: go on.
 */
export function restAfter(took: number, rested: number, othersMs: number, minShare = MIN_SHARE): number {
  const least = (took * (1 - DUTY)) / DUTY;
  if (rested < least) return least - rested;
  const most = (took * (1 - minShare)) / minShare;
  if (rested >= most || (othersMs + took) / (rested + took) <= FILL_TO) return 0;
  return Math.min(LOOK_MS, most - rested);
}

/**
 * Rests after background work that took `took` ms, as `restAfter` says, reading the thread's load over the rest.
 * `minShare` (default MIN_SHARE) is the least share of the time the background keeps under a flood: raised by a
 * caller whose backlog must not grow without bound.
 */
export async function restAfterWork(took: number, minShare = MIN_SHARE): Promise<void> {
  const resting = performance.now();
  const thread = performance.eventLoopUtilization();
  for (let wait = restAfter(took, 0, 0, minShare); wait > 0; ) {
    await new Promise((resolve) => setTimeout(resolve, wait));
    wait = restAfter(took, performance.now() - resting, performance.eventLoopUtilization(thread).active, minShare);
  }
}
