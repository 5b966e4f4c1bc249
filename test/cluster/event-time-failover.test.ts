import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import { EventTimeVenue, walkFences, walkOutcome, walkPlan, walkScenario } from '../../testkit/event-time.js';
import { serverRedisUrl } from '../../testkit/test-environment.js';
import { converged, ownerIndex, startCluster, type TestCluster } from './cluster-support.js';

/**
 * Seeded like the property test (EVENT_TIME_SEED); EVENT_TIME_FAILOVER_DEVICES walks at once. Seed 9 runs by hand
 * (EVENT_TIME_SEED=9): it lost a correct max stay folded into an alarm a correction closed (fixed, m0035), and under
 * CI's load it once lost another device's max stay, not yet traced (docs/event-time.md, limits).
 */
const SEEDS = process.env.EVENT_TIME_SEED ? [Number(process.env.EVENT_TIME_SEED)] : [3030];
const DEVICES = Number(process.env.EVENT_TIME_FAILOVER_DEVICES ?? 8);

/**
 * Issue 30, across a failover: devices upload their offline buffers (in every order the property test uses) while
 * the building's owner dies halfway through (as `kill -9`: nothing released); the survivor takes the building over,
 * rebuilds from storage, and every device's standing enters and exits still equal those of its walk uploaded on
 * time. The uploads the dead owner took but never detected are detected by the survivor.
 */
describe.skipIf(!serverRedisUrl).each(SEEDS)(`event time across a failover (seed %i, ${DEVICES} devices)`, (SEED) => {
  let cluster: TestCluster | undefined;
  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });

  it('keeps the property when the owner dies mid-upload', async () => {
    const running = (cluster = await startCluster(2));
    await converged(running.gateways);
    const created = await createVenue(running.admins[0]!, 'Event time failover venue');
    const owner = ownerIndex(running.gateways, created.building.id);
    const survivor = 1 - owner;
    // Everything goes through the survivor, which hands the building's positions to its owner, whichever it is.
    const venue = new EventTimeVenue(running.gateways[survivor]!, running.admins[survivor]!, created.building.id, created.floors[0].id);
    await walkFences(venue);
    const plans = fc
      .sample(walkScenario, { seed: SEED, numRuns: DEVICES })
      .map((scenario, index) => walkPlan(venue, scenario, `ref-${index}`, `late-${index}`));
    for (const plan of plans) await venue.upload(plan.reference);
    for (const plan of plans) await venue.upload(plan.onTime);
    await venue.settle();

    // The devices' uploads after they come back, interleaved, with the owner killed halfway through them.
    const uploads: object[][] = [];
    for (let round = 0; plans.some((plan) => plan.uploads.length > round); round++)
      for (const plan of plans) if (plan.uploads[round]) uploads.push(plan.uploads[round]!);
    const killAt = Math.floor(uploads.length / 2);
    for (const [index, upload] of uploads.entries()) {
      if (index === killAt) await running.gateways[owner]!.gateway.services.cluster.abandon();
      await venue.upload(upload);
    }
    await converged([running.gateways[survivor]!]);
    expect(running.gateways[survivor]!.gateway.services.cluster.ownsBuilding(created.building.id)).toBe(true);
    await venue.settle();

    // The standing events and max-stay alarms.
    for (const index of plans.keys())
      expect(await walkOutcome(venue, `late-${index}`), `device ${index}`).toEqual(await walkOutcome(venue, `ref-${index}`));
  });
});
