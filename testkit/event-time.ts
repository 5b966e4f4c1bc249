import fc from 'fast-check';
import { expect } from 'vitest';
import type { TestClient } from './http-client.js';
import { squareCartesians } from './cartography.js';
import type { RunningGateway } from './test-gateway.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface StoredZoneEvent {
  id: string;
  type: 'enter' | 'exit';
  zone_id: string;
  at_ms: number;
  late: boolean;
  delay_ms: number | null;
  supersedes: string | null;
  superseded: boolean;
}

export interface StoredMaxStay {
  id: string;
  state: string;
  geofence_id: string;
  details: Record<string, unknown>;
}

/** One venue's devices, uploads and what detection stored for them, for the event-time tests. */
export class EventTimeVenue {
  /** The sentinel's newest fix time: each settle starts after it. */
  private sentinelAt = 0;
  private sentinelFence?: string;

  constructor(
    private readonly running: RunningGateway,
    private readonly admin: TestClient,
    readonly buildingId: number,
    readonly floorId: number,
  ) {}

  async fence(name: string, x: number, y: number, size: number, extra: object = {}): Promise<string> {
    const created = await this.admin.post('/api/v1/geofences', {
      name,
      building_id: this.buildingId,
      floor_id: this.floorId,
      type: 'POLYGON',
      cartesians: squareCartesians(x, y, size),
      ...extra,
    });
    expect(created.status, created.text).toBe(201);
    return created.body.id;
  }

  pose(deviceId: string, timestamp: number, x: number, y: number) {
    return { device_id: deviceId, timestamp, building_id: this.buildingId, floor_id: this.floorId, x, y };
  }

  async upload(poses: object[]): Promise<void> {
    const answer = await this.admin.post('/api/v1/realtime/positions', { poses });
    expect(answer.status, answer.text).toBe(204);
  }

  /**
   * Waits until detection has finished everything uploaded so far, the late path's replays included (they run
   * beside the on-time series, in a queue per organization: gateway/detection/late-queue.ts). A sentinel device of
   * the same organization, inside a fence of its own, leaves it, and then sends a fix from between the two that
   * shows it left earlier: that one is replayed after every late fix queued before it, and its exit is stored by
   * the replay. Then it enters again on time: the organization's detections are stored in order (the replays'
   * max-stay alarms among them), so once that enter is stored, so is all before it.
   */
  async settle(): Promise<void> {
    this.sentinelFence ??= await this.fence('Sentinel', 100, 60, 10);
    // Its fixes 10 ms apart, so its clock keeps to the wall clock: 1 s apart, each settle took it 4 s further while
    // one takes well under that, and at 60 runs its fixes went more than 5 minutes into the future and were refused.
    const start = Math.max(Date.now(), this.sentinelAt + 10);
    this.sentinelAt = start + 30;
    // Inside (already, but the first time): then out, and the late fix from between.
    await this.upload([this.pose('sentinel', start, 105, 65)]);
    await this.upload([this.pose('sentinel', start + 20, 115, 75)]);
    await this.upload([this.pose('sentinel', start + 10, 115, 75)]);
    await this.stored('exit', start + 10);
    await this.upload([this.pose('sentinel', start + 30, 105, 65)]);
    await this.stored('enter', start + 30);
  }

  /** Waits until the sentinel's event of that type and fix time is stored (and stands). */
  private async stored(type: 'enter' | 'exit', at: number): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (!(await this.zoneEvents('sentinel')).some((event) => event.type === type && event.at_ms === at && !event.superseded)) {
      if (Date.now() > deadline) throw new Error('detection did not settle');
      await sleep(25);
    }
  }

  zoneEvents(deviceId: string): Promise<StoredZoneEvent[]> {
    return this.running.gateway.services.storage.execute<StoredZoneEvent>(
      `select id::text as id, type, zone_id, round(extract(epoch from at) * 1000)::float8 as at_ms, late, delay_ms::float8 as delay_ms,
              supersedes::text as supersedes, superseded
       from zone_events where device_id = ? order by at, id`,
      [deviceId],
    );
  }

  maxStays(deviceId: string): Promise<StoredMaxStay[]> {
    return this.running.gateway.services.storage.execute<StoredMaxStay>(
      `select id, state, geofence_id, details from alarms where device_id = ? and type = 'GEOFENCE_MAX_STAY_TIME' order by created_at`,
      [deviceId],
    );
  }
}

/*
 * The walks of the event-time property (test/integration/event-time.property.test.ts), shared with the late runs
 * across a failover (test/cluster/event-time-failover.test.ts).
 */

/** Where a walk can be: in the ward (and the wing), in the store (and the wing), in the wing's corridor only, outside. */
export const PLACES: readonly [number, number][] = [
  [15, 15],
  [45, 15],
  [30, 15],
  [75, 15],
];
export const OUTSIDE = 3;

/**
 * Fix spacing in whole 10 s steps and a ward limit of 69 s: a stay reaches it only at 70 s, so the few seconds a
 * live sweep carries a silent device's clock forward between this test's uploads cannot take a stay over that
 * the fixes do not (the on-time reference is uploaded at once, and has no such silence).
 */
const step = fc.record({
  place: fc.integer({ min: 0, max: PLACES.length - 1 }),
  dt: fc.integer({ min: 1, max: 9 }).map((n) => n * 10_000),
});

/** A walk, its offline stretch and how its buffer is uploaded. */
export const walkScenario = fc
  .record({
    walk: fc.array(step, { minLength: 4, maxLength: 24 }),
    /** Where the offline stretch starts and how long it is, as fractions of the walk. */
    offlineStart: fc.double({ min: 0.05, max: 0.8, noNaN: true }),
    offlineShare: fc.double({ min: 0.1, max: 0.9, noNaN: true }),
    /**
     * `stragglers`: not an offline stretch but single fixes of it held back (a third of them) while the rest go on
     * time, each sent alone afterwards in shuffled order, as a phone's retried uploads come.
     */
    order: fc.constantFrom('oldest-first', 'newest-first', 'random-chunks', 'stragglers'),
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

export type WalkScenario = typeof walkScenario extends fc.Arbitrary<infer T> ? T : never;

/** The walks' fences: one with max stays only, two debounced. */
export async function walkFences(venue: EventTimeVenue): Promise<void> {
  await venue.fence('Ward', 10, 10, 10, { max_stay_time: 69 });
  // Debounced fences: a dwell or grace under way when the device goes offline, or across its buffer, must end
  // as it does on time. Thresholds of 9 s past a multiple of 10 leave the same slack to a live sweep's clock.
  await venue.fence('Store', 40, 10, 10, { max_stay_time: 119, min_dwell_s: 19, exit_grace_s: 29 });
  await venue.fence('Wing', 5, 5, 50, { exit_grace_s: 19 });
}

/**
 * One walk as uploads: `reference`, the whole walk on time in one upload (by another device); `onTime`, the late
 * device's fixes until it goes offline; `uploads`, what it sends afterwards in order (its live fix, the buffer
 * oldest first, newest first or in shuffled chunks, the fixes after; or, as stragglers, the stretch on time but a
 * third of its fixes, then each of those alone).
 */
export function walkPlan(venue: EventTimeVenue, scenario: WalkScenario, referenceId: string, lateId: string) {
  const { walk, start, end, order, liveFirst, chunkKeys, chunkSize } = scenario;
  // The walk ends outside every fence for longer than any exit grace, so no stay or debounce is left open for a
  // sweep to judge after the last fix.
  const steps = [...walk, { place: OUTSIDE, dt: 10_000 }, { place: OUTSIDE, dt: 30_000 }];
  let time = Date.now() - 3 * 3600_000;
  const times = steps.map((s) => (time += s.dt));
  const fixes = (deviceId: string, from: number, to: number) =>
    steps.slice(from, to).map((s, index) => venue.pose(deviceId, times[from + index]!, ...PLACES[s.place]!));
  const buffer = fixes(lateId, start, end);
  const live = fixes(lateId, end, end + 1);
  const uploads: object[][] = [];
  if (order === 'stragglers') {
    // A third of the stretch held back, the rest on time with the live fix; then each held fix alone.
    const held = buffer.filter((_, index) => chunkKeys[index % chunkKeys.length]! % 3 === 0);
    uploads.push([...buffer.filter((pose) => !held.includes(pose)), ...live]);
    const shuffled = held.map((pose, index) => ({ pose, key: chunkKeys[(index * 7 + 3) % chunkKeys.length]! * 100 + index }));
    shuffled.sort((a, b) => a.key - b.key);
    for (const { pose } of shuffled) uploads.push([pose]);
  } else {
    if (liveFirst && live.length > 0) uploads.push(live);
    if (order === 'oldest-first') uploads.push(buffer);
    else if (order === 'newest-first') uploads.push([...buffer].reverse());
    else {
      const chunks: (typeof buffer)[] = [];
      for (let index = 0; index < buffer.length; index += chunkSize) chunks.push(buffer.slice(index, index + chunkSize));
      const shuffled = chunks.map((chunk, index) => ({ chunk, key: chunkKeys[index % chunkKeys.length]! * 100 + index }));
      shuffled.sort((a, b) => a.key - b.key);
      for (const { chunk } of shuffled) uploads.push(chunk);
    }
    if (!liveFirst && live.length > 0) uploads.push(live);
  }
  const after = fixes(lateId, end + 1, steps.length);
  if (after.length > 0) uploads.push(after);
  return { reference: fixes(referenceId, 0, steps.length), onTime: fixes(lateId, 0, start), uploads };
}

/** What must agree: the standing events and the standing max-stay alarms, by what they are and their fix time. */
export async function walkOutcome(venue: EventTimeVenue, deviceId: string) {
  return {
    events: (await venue.zoneEvents(deviceId))
      .filter((event) => !event.superseded)
      .map((event) => `${event.type} ${event.zone_id} ${event.at_ms}`)
      .sort(),
    alarms: (await venue.maxStays(deviceId))
      .map((alarm) => ({ ...alarm, details: typeof alarm.details === 'string' ? JSON.parse(alarm.details) : alarm.details }))
      .filter((alarm) => alarm.details.superseded !== true)
      .map((alarm) => `${alarm.geofence_id} ${alarm.details.entered_at}`)
      .sort(),
  };
}
