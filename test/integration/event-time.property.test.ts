import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import { EventTimeVenue, walkFences, walkOutcome, walkPlan, walkScenario } from '../../testkit/event-time.js';
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

  it('stores the same enters, exits and max-stay alarms whatever order the buffer arrives in', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(walkScenario, async (scenario) => {
        run++;
        const plan = walkPlan(venue, scenario, `ref-${run}`, `late-${run}`);
        await venue.upload(plan.reference);
        await venue.upload(plan.onTime);
        await venue.settle(); // on time until it goes offline
        for (const upload of plan.uploads) await venue.upload(upload);
        await venue.settle();

        expect(await walkOutcome(venue, `late-${run}`)).toEqual(await walkOutcome(venue, `ref-${run}`));
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true, ...(PATH ? { path: PATH } : {}) },
    );
  });
});
