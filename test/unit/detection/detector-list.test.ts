import { describe, expect, it } from 'vitest';
import { DetectionEngine } from '../../../gateway/detection/detection-engine.js';
import type { Detector, DetectorContext, Fix, Leave, StoredDevice, Sweep } from '../../../gateway/detection/detector.js';
import { createDetectors } from '../../../gateway/detection/detectors/index.js';
import { StayDetector } from '../../../gateway/detection/detectors/stays.js';
import type { Detections } from '../../../gateway/detection/detections.js';
import type { BuildingRuntime } from '../../../gateway/realtime/building-registry.js';
import type { PositionRecord } from '../../../shared/positions/position-record.js';
import type { CartographyEvent } from '../../../shared/storage/entities/index.js';
import { buildingRow, buildingRuntime, geofenceRow, peekingRegistry } from '../../../testkit/detection.js';
import { positionRecord } from '../../../testkit/positions.js';

const T0 = Date.UTC(2025, 0, 6, 9, 0, 0);
const s = (seconds: number) => T0 + seconds * 1000;
const at = (second: number, x: number, fields: Partial<PositionRecord> = {}) =>
  positionRecord({ ...fields, x, y: 5, timestamp: s(second) });

/**
 * A detector written in this test, as a new one would be: it counts a device's fixes in a building and raises a
 * DEADMAN-typed alarm (the type matters not here) at the third; a sweep reports what it counted, leaving starts it
 * over, and a rebuild takes the count from the stored trail. It records every call the engine makes.
 */
class FixCounter implements Detector<number> {
  readonly name = 'fix-counter';
  readonly clock = 'arrival' as const;
  readonly calls: string[] = [];
  readonly counted: number[] = [];

  initial(): number {
    return 0;
  }

  observe(state: number, fix: Fix, out: Detections): number {
    this.calls.push(`observe ${fix.device.deviceId} ${state}`);
    if (!fix.detection) return state;
    if (state + 1 === 3)
      out.alarms.push({
        organizationId: fix.device.organizationId,
        type: 'DEADMAN',
        deviceId: fix.device.deviceId,
        idempotencyKey: 'third',
      });
    return state + 1;
  }

  sweep(state: number, sweep: Sweep): number {
    this.calls.push(`sweep ${sweep.device.deviceId} ${state}`);
    this.counted.push(state);
    return state;
  }

  leave(state: number, leave: Leave): void {
    this.calls.push(`leave ${leave.device.deviceId} ${state}`);
  }

  restore(stored: StoredDevice): number {
    return stored.trail.length;
  }
}

const fence = geofenceRow({ maxStayTime: 30 });

function engineOf(runtime: BuildingRuntime, detectors?: (context: DetectorContext) => readonly Detector[]) {
  return new DetectionEngine(
    peekingRegistry((id) => (id === runtime.id ? runtime : undefined)),
    3600_000,
    undefined,
    detectors,
  );
}

describe('the detector list', () => {
  it('is zones, then stays (which follow them), then dead-man', () => {
    let names: string[] = [];
    engineOf(buildingRuntime(buildingRow()), (context) => {
      const detectors = createDetectors(context);
      names = detectors.map((detector) => detector.name);
      return detectors;
    });
    expect(names).toEqual(['zones', 'stays', 'deadman']);
  });

  it('refuses a list whose detector reads the state of one not in it', () => {
    expect(() => engineOf(buildingRuntime(buildingRow()), (context) => [new StayDetector(context)])).toThrow(
      /zones, which is not in the list/,
    );
  });

  it('is what the engine runs, and only that: a list without zones and stays finds no enter and no stay', () => {
    const runtime = buildingRuntime(buildingRow(), [fence]);
    const counter = new FixCounter();
    const engine = engineOf(runtime, () => [counter]);
    const found = [0, 10, 20, 40].map((second) => engine.observe(at(second, 5), runtime));
    expect(found.map((detections) => detections.zoneEvents)).toEqual([[], [], [], []]);
    expect(found.map((detections) => detections.alarms.map((alarm) => alarm.idempotencyKey))).toEqual([[], [], ['third'], []]);
    expect(engine.sweep(s(41)).alarms).toEqual([]);
    expect(counter.calls).toEqual(['observe d 0', 'observe d 1', 'observe d 2', 'observe d 3', 'sweep d 4']);
  });

  it('runs a detector added to the list in a test beside the others, with its own state, without touching the engine', () => {
    const runtime = buildingRuntime(buildingRow(), [fence]);
    const counter = new FixCounter();
    const engine = engineOf(runtime, (context) => [...createDetectors(context), counter]);
    const first = engine.observe(at(0, 5), runtime);
    expect(first.zoneEvents.map((event) => [event.type, event.zoneId])).toEqual([['enter', 'fence-1']]);
    engine.observe(at(1, 5), runtime);
    expect(engine.observe(at(2, 5), runtime).alarms.map((alarm) => alarm.idempotencyKey)).toEqual(['third']);
    // The built-in ones carry on: the stay runs over at 31 s; the sweep reaches the counter with its count.
    expect(engine.sweep(s(31)).alarms.map((alarm) => alarm.type)).toEqual(['GEOFENCE_MAX_STAY_TIME']);
    expect(counter.counted).toEqual([3]);
    // Leaving the building: the zones exit, the counter is told and starts over.
    const left = engine.observe(at(32, 5, { buildingId: 2, floorId: 2 }), runtime);
    expect(left.zoneEvents.map((event) => event.type)).toEqual(['exit']);
    expect(counter.calls.filter((call) => call.startsWith('leave'))).toEqual(['leave d 3']);
    expect(counter.calls.at(-1)).toBe('observe d 0');
  });

  it('rebuilds every detector of the list from what storage says', () => {
    const runtime = buildingRuntime(buildingRow(), [fence]);
    const counter = new FixCounter();
    const engine = engineOf(runtime, (context) => [...createDetectors(context), counter]);
    const last = at(10, 5);
    const trail = [0, 5, 10].map((second) => ({ at: s(second), position: { x: 5, y: 5, floorId: 1, buildingId: 1 } }));
    engine.restore({
      last,
      detection: engine.buildings.of(runtime),
      stays: new Map([['fence-1', { kind: 'geofence', enteredAt: s(0), alarmed: false }]]),
      trail,
      deadman: {},
      settledBefore: s(10),
    });
    engine.sweep(s(20));
    expect(counter.counted).toEqual([3]);
    // The stay restored runs over 30 s after its stored enter, found by the sweep as if it had never been lost.
    expect(engine.sweep(s(31)).alarms.map((alarm) => [alarm.type, alarm.geofenceId])).toEqual([['GEOFENCE_MAX_STAY_TIME', 'fence-1']]);
  });
});

describe('zone kinds are data', () => {
  const event = {
    id: 7,
    buildingId: 1,
    floorId: 1,
    x: 50,
    y: 5,
    radius: 3,
    name: 'Welcome',
    info: 'hello',
    url: null,
    conversion: { floorId: 1, x: 80, y: 5, radius: 3 },
  } as unknown as CartographyEvent;

  it('names each zone event by the kind and id of its zone, whatever the zone key looks like', () => {
    // A geofence whose id reads like an event area's key is still a geofence (ids are uuids in storage; the key is never parsed).
    const runtime = buildingRuntime(buildingRow(), [geofenceRow({ id: 'event:9' })]);
    runtime.events = [event];
    const engine = engineOf(runtime);
    const kinds = [5, 50, 80].map((x, second) =>
      engine.observe(at(second, x), runtime).zoneEvents.map((zone) => `${zone.type} ${zone.zoneKind} ${zone.zoneId} ${zone.zoneName}`),
    );
    expect(kinds).toEqual([
      ['enter geofence event:9 Square'],
      ['exit geofence event:9 Square', 'enter event 7 Welcome'],
      ['exit event 7 Welcome', 'enter conversion 7 Welcome'],
    ]);
  });

  it('exits a zone gone from the cartography, and one known only from storage, under its own kind and id', () => {
    const runtime = buildingRuntime(buildingRow());
    runtime.events = [event];
    let current = runtime;
    const engine = new DetectionEngine(
      peekingRegistry(() => current),
      3600_000,
    );
    expect(engine.observe(at(0, 50), runtime).zoneEvents.map((zone) => zone.zoneKind)).toEqual(['event']);
    // The event is deleted: a new cartography version without it; the device standing there exits it.
    current = { ...runtime, events: [] };
    expect(engine.observe(at(1, 50), current).zoneEvents.map((zone) => [zone.type, zone.zoneKind, zone.zoneId])).toEqual([
      ['exit', 'event', '7'],
    ]);
    // Restored inside a conversion area of an event deleted before the rebuild: its exit names it as storage did.
    engine.restore({
      last: at(2, 90, { deviceId: 'd2' }),
      detection: engine.buildings.of(current),
      stays: new Map([[engine.buildings.keyOf('conversion', '12'), { kind: 'conversion', enteredAt: s(0), alarmed: false }]]),
      trail: [],
      deadman: {},
      settledBefore: s(2),
    });
    expect(
      engine.observe(at(3, 90, { deviceId: 'd2' }), current).zoneEvents.map((zone) => [zone.type, zone.zoneKind, zone.zoneId]),
    ).toEqual([['exit', 'conversion', '12']]);
  });
});
