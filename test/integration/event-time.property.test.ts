import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../support/cartography.js';
import { EventTimeVenue } from '../support/event-time.js';
import type { TestClient } from '../support/http-client.js';
import { adminClient } from '../support/identity.js';
import { driverLabel } from '../support/test-environment.js';
import { startTestGateway, type RunningGateway } from '../support/test-gateway.js';

/** Seeded, so a failure names its seed and replays (EVENT_TIME_PATH); EVENT_TIME_SEED / EVENT_TIME_RUNS explore further. */
const SEED = Number(process.env.EVENT_TIME_SEED ?? 3030);
const RUNS = Number(process.env.EVENT_TIME_RUNS ?? 20);
/** fast-check's replay path of a failure (printed with it), to run that case alone. */
const PATH = process.env.EVENT_TIME_PATH;

/** Where a walk can be: in the ward (and the wing), in the store (and the wing), in the wing's corridor only, outside. */
const PLACES: readonly [number, number][] = [
  [15, 15],
  [45, 15],
  [30, 15],
  [75, 15],
];
const OUTSIDE = 3;

/**
 * Fix spacing in whole 10 s steps and a ward limit of 69 s: a stay reaches it only at 70 s, so the few seconds a
 * live sweep carries a silent device's clock forward between this test's uploads cannot take a stay over that
 * the fixes do not (the on-time reference is uploaded at once, and has no such silence).
 */
const step = fc.record({
  place: fc.integer({ min: 0, max: PLACES.length - 1 }),
  dt: fc.integer({ min: 1, max: 9 }).map((n) => n * 10_000),
});

const scenario = fc
  .record({
    walk: fc.array(step, { minLength: 4, maxLength: 24 }),
    /** Where the offline stretch starts and how long it is, as fractions of the walk. */
    offlineStart: fc.double({ min: 0.05, max: 0.8, noNaN: true }),
    offlineShare: fc.double({ min: 0.1, max: 0.9, noNaN: true }),
    order: fc.constantFrom('oldest-first', 'newest-first', 'random-chunks'),
    /** The app sends its live fix before the buffer (the usual case), or the buffer first. */
    liveFirst: fc.boolean(),
    chunkKeys: fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 24, maxLength: 24 }),
    chunkSize: fc.integer({ min: 1, max: 5 }),
  })
  .map((s) => {
    const n = s.walk.length;
    const start = Math.max(1, Math.min(n - 1, Math.floor(s.offlineStart * n)));
    const end = Math.min(n, start + Math.max(1, Math.round(s.offlineShare * n)));
    return { ...s, start, end };
  });

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
    await venue.fence('Ward', 10, 10, 10, { max_stay_time: 69 });
    // Debounced fences: a dwell or grace under way when the device goes offline, or across its buffer, must end
    // as it does on time. Thresholds of 9 s past a multiple of 10 leave the same slack to a live sweep's clock.
    await venue.fence('Store', 40, 10, 10, { max_stay_time: 119, min_dwell_s: 19, exit_grace_s: 29 });
    await venue.fence('Wing', 5, 5, 50, { exit_grace_s: 19 });
  });
  afterAll(async () => {
    await running?.stop();
  });

  /** What must agree: the standing events and the standing max-stay alarms, by what they are and their fix time. */
  const outcome = async (deviceId: string) => ({
    events: (await venue.zoneEvents(deviceId))
      .filter((event) => !event.superseded)
      .map((event) => `${event.type} ${event.zone_id} ${event.at_ms}`)
      .sort(),
    alarms: (await venue.maxStays(deviceId))
      .map((alarm) => ({ ...alarm, details: typeof alarm.details === 'string' ? JSON.parse(alarm.details) : alarm.details }))
      .filter((alarm) => alarm.details.superseded !== true)
      .map((alarm) => `${alarm.geofence_id} ${alarm.details.entered_at}`)
      .sort(),
  });

  it('stores the same enters, exits and max-stay alarms whatever order the buffer arrives in', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(scenario, async ({ walk, start, end, order, liveFirst, chunkKeys, chunkSize }) => {
        run++;
        // The walk ends outside every fence for longer than any exit grace, so no stay or debounce is left open for
        // a sweep to judge after the last fix.
        const steps = [...walk, { place: OUTSIDE, dt: 10_000 }, { place: OUTSIDE, dt: 30_000 }];
        let time = Date.now() - 3 * 3600_000;
        const times = steps.map((s) => (time += s.dt));
        const fixes = (deviceId: string, from: number, to: number) =>
          steps.slice(from, to).map((s, index) => venue.pose(deviceId, times[from + index]!, ...PLACES[s.place]!));

        const reference = `ref-${run}`;
        await venue.upload(fixes(reference, 0, steps.length));

        const late = `late-${run}`;
        await venue.upload(fixes(late, 0, start));
        await venue.settle(); // on time until it goes offline
        const buffer = fixes(late, start, end);
        const live = fixes(late, end, end + 1);
        if (liveFirst && live.length > 0) await venue.upload(live);
        if (order === 'oldest-first') await venue.upload(buffer);
        else if (order === 'newest-first') await venue.upload([...buffer].reverse());
        else {
          const chunks: (typeof buffer)[] = [];
          for (let index = 0; index < buffer.length; index += chunkSize) chunks.push(buffer.slice(index, index + chunkSize));
          const shuffled = chunks.map((chunk, index) => ({ chunk, key: chunkKeys[index % chunkKeys.length]! * 100 + index }));
          shuffled.sort((a, b) => a.key - b.key);
          for (const { chunk } of shuffled) await venue.upload(chunk);
        }
        if (!liveFirst && live.length > 0) await venue.upload(live);
        const after = fixes(late, end + 1, steps.length);
        if (after.length > 0) await venue.upload(after);
        await venue.settle();

        expect(await outcome(late)).toEqual(await outcome(reference));
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true, ...(PATH ? { path: PATH } : {}) },
    );
  });
});
