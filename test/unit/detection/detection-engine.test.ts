import { describe, expect, it } from 'vitest';
import { DetectionEngine } from '../../../gateway/detection/detection-engine.js';
import type { Geofence } from '../../../shared/storage/entities/index.js';
import type { PositionRecord } from '../../../shared/positions/position-record.js';
import { buildingRow, buildingRuntime, geofenceRow, peekingRegistry } from '../../../testkit/detection.js';
import { positionRecord } from '../../../testkit/positions.js';

const T0 = Date.UTC(2025, 0, 6, 9, 0, 0);
const s = (seconds: number) => T0 + seconds * 1000;

/** One building, one floor, one 10 m square fence at (0,0) with the given rules. */
function venue(rules: Partial<Pick<Geofence, 'maxStayTime' | 'minDwellS' | 'exitGraceS'>>) {
  const runtime = buildingRuntime(buildingRow(), [geofenceRow(rules)]);
  const engine = new DetectionEngine(
    peekingRegistry(() => runtime),
    3600_000,
  );
  const at = (second: number, x: number) => positionRecord({ x, y: 5, timestamp: s(second) });
  return { engine, runtime, observe: (second: number, x: number) => engine.observe(at(second, x), runtime) };
}

describe('DetectionEngine: transitions and max stay together', () => {
  it('raises max stay once for a device that stays, from positions and from the sweep alike', () => {
    const { engine, observe } = venue({ maxStayTime: 30 });
    observe(0, 5);
    for (let second = 1; second <= 30; second++) expect(observe(second, 5).alarms).toEqual([]);
    expect(observe(31, 5).alarms.map((a) => a.type)).toEqual(['GEOFENCE_MAX_STAY_TIME']);
    expect(observe(32, 5).alarms).toEqual([]);
    expect(engine.sweep(s(40)).alarms).toEqual([]);

    const quiet = venue({ maxStayTime: 30 });
    quiet.observe(0, 5);
    expect(quiet.engine.sweep(s(30)).alarms).toEqual([]);
    expect(quiet.engine.sweep(s(31)).alarms.map((a) => a.geofenceId)).toEqual(['fence-1']);
  });

  it('ends the stay with an exit settled by the sweep: no max-stay alarm for a fence already left', () => {
    const { engine, observe } = venue({ maxStayTime: 30, exitGraceS: 5 });
    observe(0, 5);
    observe(10, 50); // outside: the exit waits for its 5 s grace
    const settled = engine.sweep(s(16));
    expect(settled.zoneEvents.map((e) => e.type)).toEqual(['exit']);
    expect(engine.sweep(s(40)).alarms).toEqual([]);
    expect(observe(41, 50).alarms).toEqual([]);
  });

  it('starts a new stay on re-entry that can fire again', () => {
    const { observe } = venue({ maxStayTime: 30 });
    observe(0, 5);
    expect(observe(31, 5).alarms).toHaveLength(1);
    observe(32, 50);
    observe(33, 5);
    expect(observe(63, 5).alarms).toEqual([]);
    expect(observe(64, 5).alarms).toHaveLength(1);
  });
});

describe('DetectionEngine: max stay in a building that had no max-stay rule', () => {
  /** One engine over a building whose cartography (a new runtime) changes under it. */
  function changing() {
    let current = venue({}).runtime;
    const engine = new DetectionEngine(
      peekingRegistry(() => current),
      3600_000,
    );
    const observe = (second: number, x: number) => engine.observe(positionRecord({ x, y: 5, timestamp: s(second) }), current);
    const cartography = (rules: Parameters<typeof venue>[0]) => void (current = venue(rules).runtime);
    return { engine, observe, cartography };
  }
  const enteredAt = (alarms: { details?: unknown }[]) => alarms.map((alarm) => (alarm.details as { entered_at: string }).entered_at);

  it('applies a rule added mid-stay to the stay under way, from its enter', () => {
    const { engine, observe, cartography } = changing();
    observe(0, 5);
    observe(10, 50);
    observe(20, 5); // the stay under way starts here
    cartography({ maxStayTime: 30 });
    expect(engine.sweep(s(50)).alarms).toEqual([]);
    expect(enteredAt(engine.sweep(s(51)).alarms)).toEqual([new Date(s(20)).toISOString()]);
  });

  it('does not count a stay that ended while the building had no rule', () => {
    const { engine, observe, cartography } = changing();
    cartography({ maxStayTime: 30 });
    observe(0, 5); // a stay under the first rule
    cartography({});
    observe(10, 50); // ends while there is no rule
    observe(20, 5);
    cartography({ maxStayTime: 30 });
    expect(engine.sweep(s(45)).alarms).toEqual([]); // 45 s since the first enter, 25 s into this stay
    expect(enteredAt(engine.sweep(s(51)).alarms)).toEqual([new Date(s(20)).toISOString()]);
  });
});

describe('DetectionEngine: a bounded number of tracked devices', () => {
  it('keeps at most maxDevices, settling the least recently seen one (its exit is emitted by the next sweep)', () => {
    const { runtime } = venue({});
    const engine = new DetectionEngine(
      peekingRegistry(() => runtime),
      3600_000,
      3,
    );
    const at = (deviceId: string, second: number, x: number) => positionRecord({ deviceId, x, y: 5, timestamp: s(second) });
    engine.observe(at('inside', 0, 5), runtime); // enters the fence
    engine.observe(at('b', 1, 50), runtime);
    engine.observe(at('c', 2, 50), runtime);
    engine.observe(at('b', 3, 50), runtime); // b is seen again: it is not the oldest any more
    expect(engine.trackedDevices).toBe(3);
    for (let i = 0; i < 20; i++) engine.observe(at(`new-${i}`, 4 + i, 50), runtime);
    expect(engine.trackedDevices).toBe(3);
    const settled = engine.sweep(s(30));
    expect(settled.zoneEvents.map((event) => [event.deviceId, event.type])).toEqual([['inside', 'exit']]);
  });

  it('evicts the least recently seen, not the first seen', () => {
    const { runtime } = venue({});
    const engine = new DetectionEngine(
      peekingRegistry(() => runtime),
      3600_000,
      2,
    );
    const at = (deviceId: string, second: number) => positionRecord({ deviceId, x: 5, y: 5, timestamp: s(second) });
    engine.observe(at('first', 0), runtime);
    engine.observe(at('second', 1), runtime);
    engine.observe(at('first', 2), runtime);
    engine.observe(at('third', 3), runtime); // over the cap: `second` goes
    expect(engine.sweep(s(4)).zoneEvents.map((event) => event.deviceId)).toEqual(['second']);
  });
});

describe('DetectionEngine: event time', () => {
  /** A fix taken at `second`, arriving at `arrival` (seconds after T0). */
  const fix = (second: number, x: number, arrival: number) => positionRecord({ x, y: 5, timestamp: s(second), receivedAt: s(arrival) });

  it('dates enters and exits by the fix, not by its arrival', () => {
    const { engine, runtime } = venue({});
    const entered = engine.observe(fix(0, 5, 600), runtime);
    const left = engine.observe(fix(20, 50, 600.001), runtime);
    expect(entered.zoneEvents.map((e) => [e.type, e.at])).toEqual([['enter', s(0)]]);
    expect(left.zoneEvents.map((e) => [e.type, e.at])).toEqual([['exit', s(20)]]);
  });

  it('judges max stay on fix times: a buffer uploaded at once still shows the stay that ran over', () => {
    const { engine, runtime } = venue({ maxStayTime: 30 });
    engine.observe(fix(0, 5, 900), runtime);
    expect(engine.observe(fix(30, 5, 900), runtime).alarms).toEqual([]);
    const over = engine.observe(fix(31, 5, 900), runtime).alarms;
    expect(over.map((a) => [a.type, a.details?.entered_at])).toEqual([['GEOFENCE_MAX_STAY_TIME', new Date(s(0)).toISOString()]]);
  });

  it('sweeps each device on its own clock: its newest fix carried forward by the time since it arrived', () => {
    const { engine, runtime } = venue({ maxStayTime: 30 });
    // A buffer: fixes of 0 s and 20 s arrive at 100 s and 101 s; the stay began at 0 s and was 20 s old at 101 s.
    engine.observe(fix(0, 5, 100), runtime);
    engine.observe(fix(20, 5, 101), runtime);
    expect(engine.sweep(s(111)).alarms).toEqual([]);
    expect(engine.sweep(s(111.001)).alarms.map((a) => a.geofenceId)).toEqual(['fence-1']);
  });

  it('hands a fix older than the newest one run to the late path, changing nothing live', () => {
    const { engine, runtime } = venue({});
    const late: PositionRecord[] = [];
    engine.observe(fix(10, 50, 10), runtime, undefined, late);
    const older = fix(5, 5, 11);
    expect(engine.observe(older, runtime, undefined, late)).toEqual({ zoneEvents: [], alarms: [], triggered: [] });
    expect(late).toEqual([older]);
    // The live state is the newest fix's: outside, so the next fix outside changes nothing.
    expect(engine.observe(fix(12, 50, 12), runtime, undefined, late).zoneEvents).toEqual([]);
    expect(late).toHaveLength(1);
  });
});
