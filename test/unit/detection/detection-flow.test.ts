import { describe, expect, it } from 'vitest';
import type { AlarmService, RaiseAlarm } from '../../../gateway/alarms/alarm-service.js';
import { DetectionEngine } from '../../../gateway/detection/detection-engine.js';
import { DetectionOutbox } from '../../../gateway/detection/detection-outbox.js';
import { DetectionSink, MAX_EVENTS_PER_MESSAGE } from '../../../gateway/detection/detection-sink.js';
import { DetectionSweep } from '../../../gateway/detection/detection-sweep.js';
import { OwnerDetection } from '../../../gateway/detection/owner-detection.js';
import type { ZoneEventsMessage } from '../../../gateway/detection/zone-events-message.js';
import type { Channels } from '../../../gateway/bus-channels.js';
import { LocalBus } from '../../../shared/bus/local-bus.js';
import type { ZoneEventRecord } from '../../../shared/detection/zone-event.js';
import { StorageUnavailableError } from '../../../shared/errors.js';
import { createLogger } from '../../../shared/logger.js';
import type { PositionRecord } from '../../../shared/positions/position-record.js';
import type { PositionWriter } from '../../../shared/positions/position-writer.js';
import type { Building, Geofence } from '../../../shared/storage/entities/index.js';
import { buildingRow, buildingRuntime, geofenceRow, peekingRegistry } from '../../../testkit/detection.js';
import { positionRecord } from '../../../testkit/positions.js';

const T0 = Date.UTC(2025, 0, 6, 9, 0, 0);
const s = (seconds: number) => T0 + seconds * 1000;

/**
 * Detection around the detectors (the owner's detection, the sweep, the outbox and its sink) with a database that
 * can be "down": a fake alarm store and writer that refuse with the outage error while `down`, and remember what
 * they stored (raises by idempotency key, as the real one does). No I/O, no real clock: sweeps are run at
 * hand-made times; `owns` says whether the building is still this gateway's.
 */
function world(rules: Partial<Pick<Geofence, 'maxStayTime' | 'minDwellS' | 'exitGraceS'>>, deadman: Partial<Building> = {}) {
  const runtime = buildingRuntime(buildingRow(deadman), [geofenceRow(rules)]);
  const registry = peekingRegistry(() => runtime);
  const engine = new DetectionEngine(registry, 3600_000);
  const state = { down: false, owns: true };
  const alarms: RaiseAlarm[] = [];
  const keys = new Set<string>();
  const zoneEvents: ZoneEventRecord[] = [];
  const store = (request: RaiseAlarm) => {
    if (state.down) throw new StorageUnavailableError();
    if (request.idempotencyKey !== undefined) {
      if (keys.has(request.idempotencyKey)) return undefined;
      keys.add(request.idempotencyKey);
    }
    alarms.push(request);
    return {};
  };
  const alarmService = { raiseAllOnce: async (requests: RaiseAlarm[]) => requests.map(store) } as unknown as AlarmService;
  const writer = {
    write: async (_records: unknown[], events: ZoneEventRecord[] = []) => {
      if (state.down) throw new StorageUnavailableError();
      zoneEvents.push(...events);
    },
  } as unknown as PositionWriter;
  const bus = new LocalBus<Channels>();
  const logger = createLogger('silent');
  const outbox = new DetectionOutbox(new DetectionSink({ writer, alarms: alarmService, bus, logger }), logger);
  const detection = new OwnerDetection(engine, registry, outbox);
  const sweep = new DetectionSweep({ engine, outbox, owns: () => state.owns, logger });
  const at = (second: number, x: number, deviceId = 'd') => positionRecord({ deviceId, x, y: 5, timestamp: s(second) });
  const observe = (second: number, x: number, deviceId?: string) => engine.observe(at(second, x, deviceId), runtime);
  return { engine, detection, outbox, sweep: (second: number) => sweep.run(s(second)), bus, state, alarms, zoneEvents, at, observe };
}

describe('detection: what the detectors find survives a database outage', () => {
  it('raises a max stay that ran over during an outage exactly once, after the database is back', async () => {
    const { sweep, state, alarms, observe } = world({ maxStayTime: 30 });
    observe(0, 5);
    await sweep(10);
    state.down = true;
    for (let second = 25; second <= 60; second += 5) await sweep(second); // it runs over at 31
    expect(alarms).toEqual([]);
    state.down = false;
    await sweep(61);
    await sweep(62);
    await sweep(90);
    expect(alarms.map((alarm) => [alarm.type, alarm.geofenceId])).toEqual([['GEOFENCE_MAX_STAY_TIME', 'fence-1']]);
  });

  it('raises a dead-man silence that happened during an outage once', async () => {
    const { sweep, state, alarms, observe } = world({}, { deadmanSilenceS: 20 } as Partial<Building>);
    observe(0, 50);
    state.down = true;
    for (let second = 10; second <= 40; second += 5) await sweep(second);
    state.down = false;
    for (let second = 41; second <= 45; second++) await sweep(second);
    expect(alarms.map((alarm) => [alarm.type, alarm.details?.reason])).toEqual([['DEADMAN', 'silence']]);
  });

  it('stores an exit settled by a sweep during an outage once the database is back, once', async () => {
    const { sweep, state, zoneEvents, observe } = world({ exitGraceS: 5 });
    observe(0, 5);
    observe(10, 50); // outside: the exit waits for its grace, settled by the sweep
    state.down = true;
    await sweep(16);
    await sweep(17);
    state.down = false;
    await sweep(18);
    await sweep(19);
    expect(zoneEvents.map((event) => event.type)).toEqual(['exit']);
  });

  it('consumes positions of an owned building: stored once the database is back, then acknowledgeable', async () => {
    const { detection, state, zoneEvents, at } = world({});
    state.down = true;
    expect(await consume(detection, [at(0, 5)], () => true)).toBe(false); // the enter waits in the outbox: not to be acknowledged yet
    expect(zoneEvents).toEqual([]);
    state.down = false;
    expect(await detection.stored()).toBe(true);
    expect(zoneEvents.map((event) => event.type)).toEqual(['enter']);
    // The same position again (an entry replayed after a takeover): nothing is found twice.
    expect(await consume(detection, [at(0, 5)], () => true)).toBe(true);
    expect(zoneEvents).toHaveLength(1);
  });

  it('emits nothing for a building whose ownership is lost: neither from positions nor from sweeps', async () => {
    const { detection, outbox, sweep, state, zoneEvents, alarms, at } = world({ maxStayTime: 30 });
    expect(await consume(detection, [at(0, 5)], () => false)).toBe(false);
    state.owns = false;
    await sweep(40); // the stay ran over, but the building is not this gateway's any more
    expect(zoneEvents).toEqual([]);
    expect(alarms).toEqual([]);
    expect(outbox.size).toBe(0);
  });
});

/** What an owner does with a read (gateway/cluster): detect it, then store what was found; true once stored. */
const consume = async (detection: OwnerDetection, records: PositionRecord[], holds: () => boolean) =>
  (await detection.detect(records, holds)) && detection.stored();

describe('detection: announcing what one read of a shard found', () => {
  it('announces a large batch in bounded bus messages, every event once and in order', async () => {
    const { detection, outbox, bus, at } = world({});
    const messages: ZoneEventsMessage[] = [];
    await bus.subscribe('zone-events', (message) => void messages.push(message));
    const devices = MAX_EVENTS_PER_MESSAGE + 500;
    const records = Array.from({ length: devices }, (_, index) => at(1, 5, `d-${index}`)); // every device enters the fence
    expect(await consume(detection, records, () => true)).toBe(true);
    await new Promise((resolve) => setImmediate(resolve));
    // Detected in slices of a few ms (uploads go on between them): one message or more per slice, none past the bound.
    expect(messages.every((message) => message.zoneEvents.length <= MAX_EVENTS_PER_MESSAGE)).toBe(true);
    const events = messages.flatMap((message) => message.zoneEvents);
    expect(events.map((event) => event.deviceId)).toEqual(records.map((record) => record.deviceId));
    // What one slice (or one sweep) finds together is split at the bound.
    messages.length = 0;
    outbox.add({ zoneEvents: events, alarms: [], triggered: [] }, true);
    expect(await detection.stored()).toBe(true);
    expect(messages.map((message) => message.zoneEvents.length)).toEqual([MAX_EVENTS_PER_MESSAGE, 500]);
    expect(messages.flatMap((message) => message.zoneEvents)).toEqual(events);
  });

  it('lets other work run while a large read is detected, and keeps its output in order', async () => {
    const { detection, engine, bus, at } = world({});
    const messages: ZoneEventsMessage[] = [];
    await bus.subscribe('zone-events', (message) => void messages.push(message));
    const records = Array.from({ length: 20_000 }, (_, index) => at(1, 5, `e-${index}`));
    // Devices tracked as seen by other work (a timer's ticks) while the read is detected: some part-way through.
    const seen: number[] = [];
    let ticking = true;
    const tick = () => (seen.push(engine.trackedDevices), ticking && setImmediate(tick));
    setImmediate(tick);
    expect(await consume(detection, records, () => true)).toBe(true);
    ticking = false;
    expect(seen.some((tracked) => tracked > 0 && tracked < records.length)).toBe(true);
    expect(messages.flatMap((message) => message.zoneEvents.map((event) => event.deviceId))).toEqual(
      records.map((record) => record.deviceId),
    );
  });
});
