import { describe, expect, it } from 'vitest';
import { DetectionEngine } from '../../../gateway/detection/detection-engine.js';
import type { StoredDevice } from '../../../gateway/detection/detector.js';
import type { PositionRecord } from '../../../shared/positions/position-record.js';
import { buildingRow, buildingRuntime, geofenceRow, peekingRegistry } from '../../../testkit/detection.js';
import { positionRecord } from '../../../testkit/positions.js';

const T0 = Date.UTC(2025, 0, 6, 9, 0, 0);
const s = (seconds: number) => T0 + seconds * 1000;

/** Buildings 1 and 2, each with one 10 m square fence at (0,0) staying at most 30 s, and dead-man silence after 20 s. */
function runtimeOf(id: number) {
  const fence = geofenceRow({ id: `fence-${id}`, buildingId: id, floorId: id, maxStayTime: 30 });
  return buildingRuntime(buildingRow({ id, deadmanSilenceS: 20 }), [fence], { floorId: id });
}

const buildings = new Map([1, 2].map((id) => [id, runtimeOf(id)]));
const newEngine = () =>
  new DetectionEngine(
    peekingRegistry((id) => buildings.get(id)),
    3600_000,
  );
const at = (deviceId: string, second: number, x: number, buildingId = 1) =>
  positionRecord({ deviceId, buildingId, floorId: buildingId, x, y: 5, timestamp: s(second) });
const observe = (engine: DetectionEngine, record: PositionRecord) => engine.observe(record, buildings.get(record.buildingId!));

/** What the loader reads for a device last seen at `last`, inside the fence since `enteredAt` (if given). */
function restored(last: PositionRecord, options: { enteredAt?: number; alarmed?: boolean; settledBefore?: number } = {}): StoredDevice {
  const stay = { kind: 'geofence' as const, enteredAt: options.enteredAt!, alarmed: options.alarmed ?? false };
  return {
    last,
    detection: undefined,
    stays: new Map(options.enteredAt === undefined ? [] : [[`fence-${last.buildingId}`, stay]]),
    trail: [{ at: last.receivedAt, position: { x: last.x!, y: last.y!, floorId: last.floorId!, buildingId: last.buildingId! } }],
    deadman: {},
    settledBefore: options.settledBefore ?? 0,
  };
}

describe('DetectionEngine.forgetBuilding and trackedDevicesIn', () => {
  it('drops every device of the building and nothing else, emitting nothing for them', () => {
    const engine = newEngine();
    observe(engine, at('a', 0, 5, 1));
    observe(engine, at('b', 0, 50, 1));
    observe(engine, at('c', 0, 5, 2));
    expect([engine.trackedDevicesIn(1), engine.trackedDevicesIn(2), engine.trackedDevicesIn(3)]).toEqual([2, 1, 0]);
    engine.forgetBuilding(1);
    expect([engine.trackedDevicesIn(1), engine.trackedDevicesIn(2), engine.trackedDevicesIn(3)]).toEqual([0, 1, 0]);
    // No exit for `a` (the new owner has its stay), no max-stay nor silence for it either; `c` carries on.
    const later = engine.sweep(s(40));
    expect(later.zoneEvents).toEqual([]);
    expect(later.alarms.map((alarm) => [alarm.type, alarm.deviceId])).toEqual([
      ['GEOFENCE_MAX_STAY_TIME', 'c'],
      ['DEADMAN', 'c'],
    ]);
  });
});

describe('DetectionEngine.restore', () => {
  it('raises what the outage delayed on the next sweep, once, keyed as the previous owner would have', () => {
    const engine = newEngine();
    engine.restore(restored(at('d', 10, 5), { enteredAt: s(0) }));
    expect(engine.trackedDevicesIn(1)).toBe(1);
    const delayed = engine.sweep(s(45));
    expect(delayed.alarms.map((alarm) => alarm.idempotencyKey)).toEqual([`max-stay|d|fence-1|${s(0)}`, `deadman|d|silence|${s(10)}`]);
    expect(delayed.zoneEvents).toEqual([]);
    expect(engine.sweep(s(50)).alarms).toEqual([]);
  });

  it('keeps an already alarmed stay from alarming again', () => {
    const engine = newEngine();
    engine.restore(restored(at('d', 40, 5), { enteredAt: s(0), alarmed: true }));
    expect(engine.sweep(s(45)).alarms).toEqual([]);
  });

  it('replaces what was held for the building, but not a newer state of the device', () => {
    const engine = newEngine();
    observe(engine, at('d', 20, 50));
    engine.restore(restored(at('d', 10, 5), { enteredAt: s(10) }));
    expect(observe(engine, at('d', 21, 50)).zoneEvents).toEqual([]); // still the held state: outside
    engine.forgetBuilding(1);
    engine.restore(restored(at('d', 10, 5), { enteredAt: s(10) }));
    expect(observe(engine, at('d', 22, 50)).zoneEvents.map((event) => [event.type, event.at])).toEqual([['exit', s(22)]]);
  });
});

describe('DetectionEngine: positions re-observed after a rebuild (no duplicate, no gap)', () => {
  const P = at('d', 10, 5); // inside the fence

  it('(a) emits nothing for a position whose enter is stored already', () => {
    const engine = newEngine();
    engine.restore(restored(P, { enteredAt: P.receivedAt, settledBefore: P.receivedAt }));
    const again = observe(engine, P);
    expect(again.zoneEvents).toEqual([]);
    expect(again.alarms).toEqual([]);
  });

  it('(b) emits exactly the enter of a position whose enter was not stored, though the rebuild read the position itself', () => {
    const engine = newEngine();
    engine.restore(restored(P));
    expect(observe(engine, P).zoneEvents.map((event) => [event.type, event.zoneId, event.at])).toEqual([
      ['enter', 'fence-1', P.receivedAt],
    ]);
    expect(observe(engine, P).zoneEvents).toEqual([]);
  });

  it('replays an older unfinished position in order, while alarms stay placed at the newest stored one', () => {
    const engine = newEngine();
    const latest = at('d', 12, 6);
    engine.restore(restored(latest, { settledBefore: s(5) }));
    expect(observe(engine, at('d', 4, 50)).zoneEvents).toEqual([]); // settled before the rebuild: ignored
    expect(observe(engine, P).zoneEvents.map((event) => event.type)).toEqual(['enter']);
    expect(observe(engine, latest).zoneEvents).toEqual([]);
    const late = engine.sweep(s(45)).alarms;
    expect(late.map((alarm) => [alarm.idempotencyKey, alarm.x])).toEqual([
      [`max-stay|d|fence-1|${s(10)}`, 6],
      [`deadman|d|silence|${s(12)}`, 6],
    ]);
  });

  it('ignores a replayed older position from another building, and an older one once live again', () => {
    const engine = newEngine();
    engine.restore(restored(P, { enteredAt: s(0) }));
    expect(observe(engine, at('d', 5, 5, 2)).zoneEvents).toEqual([]);
    expect(observe(engine, at('d', 11, 5)).zoneEvents).toEqual([]);
    expect(observe(engine, at('d', 9, 50)).zoneEvents).toEqual([]); // older than one observed live: dropped as before
  });
});

describe('DetectionEngine: our own absence raises nothing (resume, interrupt)', () => {
  /** Every alarm of sweeps once a second over [from, to], with the second it fired. */
  const sweeps = (engine: DetectionEngine, from: number, to: number) => {
    const fired: [number, string, string][] = [];
    for (let second = from; second <= to; second++)
      for (const alarm of engine.sweep(s(second)).alarms) fired.push([second, alarm.type, alarm.deviceId!]);
    return fired;
  };

  it('after a rebuild, silence and stays run from the resumption: a device back within its window raises nothing, one that stays silent raises its alarm a window later', () => {
    const engine = newEngine();
    // Both last seen at 10 inside the 30 s fence (since 0); we were gone until 100.
    engine.restore(restored(at('back', 10, 5), { enteredAt: s(0) }));
    engine.restore(restored(at('gone', 10, 5), { enteredAt: s(0) }));
    engine.resume([1], s(100));
    expect(sweeps(engine, 100, 110)).toEqual([]);
    observe(engine, at('back', 111, 50)); // reports again, outside the fence: the stay ended
    // gone: silence 20 s from 100; stay 10 s seen + 21 s watched. back: silent again only 20 s after 111.
    expect(sweeps(engine, 111, 131)).toEqual([
      [121, 'GEOFENCE_MAX_STAY_TIME', 'gone'],
      [121, 'DEADMAN', 'gone'],
    ]);
    const [alarm] = engine.sweep(s(132)).alarms.filter((a) => a.deviceId === 'back');
    expect(alarm).toMatchObject({ type: 'DEADMAN', details: { reason: 'silence', since: new Date(s(111)).toISOString() } });
  });

  it('without the resumption the same rebuild raises everything at once (the flood this prevents)', () => {
    const engine = newEngine();
    engine.restore(restored(at('back', 10, 5), { enteredAt: s(0) }));
    expect(sweeps(engine, 100, 100)).toEqual([
      [100, 'GEOFENCE_MAX_STAY_TIME', 'back'],
      [100, 'DEADMAN', 'back'],
    ]);
  });

  it('a resumption holds for its building only, and ends with forgetBuilding', () => {
    const engine = newEngine();
    observe(engine, at('one', 0, 50, 1));
    observe(engine, at('two', 0, 50, 2));
    engine.resume([1], s(15));
    expect(sweeps(engine, 21, 21)).toEqual([[21, 'DEADMAN', 'two']]);
    expect(sweeps(engine, 22, 36)).toEqual([[36, 'DEADMAN', 'one']]);
    engine.forgetBuilding(1);
    expect(engine.watchedSince(1, s(40))).toBe(-Infinity);
  });

  it('while interrupted (storage out) nothing runs on; once resumed, every building is judged from then', () => {
    const engine = newEngine();
    observe(engine, at('a', 0, 50, 1));
    observe(engine, at('b', 0, 50, 2));
    engine.interrupt();
    expect(sweeps(engine, 1, 100)).toEqual([]);
    engine.resumeAll(s(100));
    observe(engine, at('a', 110, 50, 1));
    expect(sweeps(engine, 101, 125)).toEqual([[121, 'DEADMAN', 'b']]);
  });
});

describe('DetectionEngine: silence storms', () => {
  const deviceIds = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

  it('30 devices silent together give one BUILDING_SILENT and no DEADMAN; one back leaves it; closing it gives the still silent their DEADMAN', () => {
    const engine = newEngine();
    const storming = deviceIds('s', 30);
    for (const id of storming) observe(engine, at(id, 0, 50));
    // Ten others keep reporting throughout.
    const report = (second: number) => {
      for (const id of deviceIds('r', 10)) observe(engine, at(id, second, 50));
    };
    const alarms: { type: string; deviceId?: string | null; onlyIfOpen?: boolean; details?: Record<string, any> }[] = [];
    for (let second = 1; second <= 25; second++) {
      report(second);
      alarms.push(...engine.sweep(s(second)).alarms);
    }
    expect(alarms.map((a) => a.type)).toEqual(['BUILDING_SILENT']);
    expect(alarms[0]).toMatchObject({
      buildingId: 1,
      deviceId: null,
      details: { started_at: new Date(s(21)).toISOString(), silence_s: 20, silent_count: 30 },
    });
    expect(alarms[0]!.details!.devices.map((d: any) => d.device_id).sort()).toEqual([...storming].sort());

    // All but one come back: the building alarm is updated, nobody gets a DEADMAN.
    for (const id of storming.slice(1)) observe(engine, at(id, 26, 50));
    report(26);
    const update = engine.sweep(s(26)).alarms;
    expect(update).toMatchObject([
      { type: 'BUILDING_SILENT', onlyIfOpen: true, details: { silent_count: 1, devices: [{ device_id: 's-0' }] } },
    ]);
    expect(update.filter((a) => a.type === 'DEADMAN')).toEqual([]);

    // Closed (on any gateway, told by the bus): the one still silent gets its own DEADMAN, dated from its last fix.
    engine.alarmsChanged([
      { event: { type: 'BUILDING_SILENT', state: 'CLOSED', building_id: 1, details: { started_at: new Date(s(21)).toISOString() } } },
    ]);
    for (const id of [...storming.slice(1), ...deviceIds('r', 10)]) observe(engine, at(id, 27, 50));
    const released = engine.sweep(s(27)).alarms;
    expect(released.map((a) => [a.type, a.deviceId, a.details?.since])).toEqual([['DEADMAN', 's-0', new Date(s(0)).toISOString()]]);
    // The storm is over: s-0's DEADMAN is its own now, so its return tells that alarm (a member's would not).
    const back = observe(engine, at('s-0', 28, 50)).alarms;
    expect(back).toMatchObject([{ type: 'DEADMAN', deviceId: 's-0', onlyIfOpen: true, idempotencyKey: `deadman-contact|s-0|${s(28)}` }]);
  });

  it('a few silent among many reporting are no storm: each raises its DEADMAN', () => {
    const engine = newEngine();
    for (const id of deviceIds('q', 3)) observe(engine, at(id, 0, 50));
    const fired: string[] = [];
    for (let second = 1; second <= 21; second++) {
      for (const id of deviceIds('r', 10)) observe(engine, at(id, second, 50));
      fired.push(...engine.sweep(s(second)).alarms.map((a) => `${a.type} ${a.deviceId}`));
    }
    expect(fired).toEqual(['DEADMAN q-0', 'DEADMAN q-1', 'DEADMAN q-2']);
  });

  it('a storm read back from its building alarm holds its members again', () => {
    const engine = newEngine();
    engine.restoreBuilding('org', 1, {
      silentAlarm: {
        started_at: new Date(s(21)).toISOString(),
        silence_s: 20,
        devices: [{ device_id: 's-0', user_id: null, since: new Date(s(0)).toISOString(), floor_id: 1, x: 50, y: 5 }],
      },
    });
    engine.alarmsChanged([
      { event: { type: 'BUILDING_SILENT', state: 'MARKED_FALSE', building_id: 1, details: { started_at: new Date(s(21)).toISOString() } } },
    ]);
    expect(engine.sweep(s(30)).alarms).toMatchObject([{ type: 'DEADMAN', deviceId: 's-0', idempotencyKey: `deadman|s-0|silence|${s(0)}` }]);
  });
});
