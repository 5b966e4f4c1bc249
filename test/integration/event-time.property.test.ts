import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import { EventTimeVenue, type WalkScenario, walkFences, walkOutcome, walkPlan, walkScenario } from '../../testkit/event-time.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/** Seeded, so a failure names its seed and replays (EVENT_TIME_PATH); EVENT_TIME_SEED / EVENT_TIME_RUNS explore further. */
const SEED = Number(process.env.EVENT_TIME_SEED ?? 3030);
const RUNS = Number(process.env.EVENT_TIME_RUNS ?? 20);
/** fast-check's replay path of a failure (printed with it), to run that case alone. */
const PATH = process.env.EVENT_TIME_PATH;

/**
 * Issue 30's property: for random walks through fences, offline stretches and upload orders, the stored enter/exit
 * events (type, zone, fix time) and max-stay alarms of a device whose buffer arrives late equal those of the same
 * walk uploaded on time and in order (another device, same venue).
 */
describe(`event time: late uploads give the events of on-time ones (${driverLabel}, seed ${SEED}, ${RUNS} runs)`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: EventTimeVenue;

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    const created = await createVenue(admin, 'Event time property venue');
    venue = new EventTimeVenue(running, admin, created.building.id, created.floors[0].id);
    await walkFences(venue);
  });
  afterAll(async () => {
    await running?.stop();
  });

  /** Uploads the walk on time (one device) and with its buffer late (another), and compares what was stored. */
  async function walkBothWays(scenario: WalkScenario, suffix: string): Promise<void> {
    const plan = walkPlan(venue, scenario, `ref-${suffix}`, `late-${suffix}`);
    await venue.upload(plan.reference);
    await venue.upload(plan.onTime);
    await venue.settle(); // on time until it goes offline
    for (const upload of plan.uploads) await venue.upload(upload);
    await venue.settle();
    expect(await walkOutcome(venue, `late-${suffix}`)).toEqual(await walkOutcome(venue, `ref-${suffix}`));
  }

  /**
   * Cases the property found, kept whatever the seed. Seed 3030 path 35 (60 runs): the Store's enter at 400 s was
   * decided by a late replay (its dwell, from the next fix it had then), its exit at 480 s by the next chunk; a later
   * replay starting between 480 s and the exit's grace end took the zone's state before it from the exit alone, as
   * if outside, and stored an enter at 480 s (outside the Store) instead of the exit and the enter at 540 s.
   */
  const found: { name: string; scenario: WalkScenario }[] = [
    {
      name: 'seed 3030 path 35: an enter decided during a late run, then an exit whose grace a later replay starts in',
      scenario: {
        walk: [
          [2, 2],
          [1, 5],
          [1, 5],
          [1, 3],
          [0, 7],
          [2, 9],
          [1, 9],
          [3, 8],
          [0, 4],
          [1, 2],
          [2, 5],
          [1, 2],
          [2, 6],
          [0, 4],
          [3, 1],
          [1, 8],
          [1, 9],
          [3, 9],
        ].map(([place, tens]) => ({ place: place!, dt: tens! * 10_000 })),
        offlineStart: 0.05,
        offlineShare: 0.82870846235387,
        order: 'random-chunks',
        liveFirst: true,
        chunkKeys: [926, 999, 4, 394, 6, 657, 1000, 4, 926, 917, 2, 625, 352, 5, 475, 6, 953, 923, 932, 708, 707, 997, 881, 1000],
        chunkSize: 2,
        start: 1,
        end: 16,
      },
    },
  ];
  for (const [index, { name, scenario }] of found.entries()) {
    it(`stores the same events and alarms for a case it found: ${name}`, () => walkBothWays(scenario, `found-${index}`));
  }

  it(
    'stores the same enters, exits and max-stay alarms whatever order the buffer arrives in',
    async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(walkScenario, (scenario) => walkBothWays(scenario, String(++run))),
        { seed: SEED, numRuns: RUNS, endOnFailure: true, ...(PATH ? { path: PATH } : {}) },
      );
      // About a second a run, more beside other suites and with the late queue's replays resting between (on
      // embedded storage they yield to uploads): the 60 s default was too short for 60 runs.
    },
    Math.max(60_000, RUNS * 3000),
  );
});
