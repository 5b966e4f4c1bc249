import { describe, expect, it } from 'vitest';
import { emptyDetections, type DetectedAlarm } from '../../../gateway/detection/detections.js';
import { DetectionOutbox, ZONE_EVENTS_PER_STORE } from '../../../gateway/detection/detection-outbox.js';
import type { ZoneEventRecord } from '../../../shared/detection/zone-event.js';
import { StorageUnavailableError } from '../../../shared/errors.js';
import { createLogger } from '../../../shared/logger.js';
import { registry } from '../../../shared/metrics/metrics.js';

const alarm = (key: string, organizationId = 'org'): DetectedAlarm => ({
  organizationId,
  type: 'DEADMAN',
  deviceId: 'd',
  idempotencyKey: key,
});
const zoneEvent = (organizationId: string, deviceId: string): ZoneEventRecord =>
  ({
    organizationId,
    buildingId: 1,
    floorId: 1,
    zoneKind: 'geofence',
    zoneId: 'z',
    zoneName: 'Z',
    deviceId,
    userId: null,
    type: 'enter',
    at: new Date(0),
    firedAt: new Date(0),
  }) as unknown as ZoneEventRecord;

/** A fake database: stores each alarm key at most once (as the alarm service does); `fail` decides refusals. */
function sink(fail: (key: string) => Error | undefined) {
  const raised: string[] = [];
  const zoneEvents: string[] = [];
  const announced: number[] = [];
  const raiseAlarm = async (a: DetectedAlarm) => {
    if (raised.includes(a.idempotencyKey)) return;
    const error = fail(a.idempotencyKey);
    if (error) throw error;
    raised.push(a.idempotencyKey);
  };
  return {
    raised,
    zoneEvents,
    announced,
    sink: {
      storeZoneEvents: async (events: readonly ZoneEventRecord[]) => {
        for (const event of events) {
          const error = fail(`zone|${event.deviceId}`);
          if (error) throw error;
        }
        zoneEvents.push(...events.map((event) => event.deviceId));
      },
      raiseAlarm,
      announce: async (entry: { zoneEvents: readonly unknown[] }) => void announced.push(entry.zoneEvents.length),
    },
  };
}

const deadLettered = async (kind: 'alarm' | 'zone_events') =>
  (await registry.getSingleMetric('floorcast_detection_dead_letters_total')?.get())?.values.find((value) => value.labels.kind === kind)
    ?.value ?? 0;

describe('DetectionOutbox', () => {
  it('keeps order and retries from where it stopped during an outage', async () => {
    let down = true;
    const { raised, sink: s } = sink((key) => (down && key === 'b' ? new StorageUnavailableError() : undefined));
    const outbox = new DetectionOutbox(s, createLogger('silent'));
    outbox.add({ ...emptyDetections(), alarms: [alarm('a'), alarm('b')] }, true);
    outbox.add({ ...emptyDetections(), alarms: [alarm('c')] }, true);
    await outbox.drain();
    expect(raised).toEqual(['a']);
    expect(outbox.size).toBe(2);
    await outbox.drain(); // still down: nothing is skipped
    expect(raised).toEqual(['a']);
    expect(outbox.deadLetterCount).toBe(0);
    down = false;
    await outbox.drain();
    expect(raised).toEqual(['a', 'b', 'c']);
    expect(outbox.size).toBe(0);
  });

  it("sets aside only the alarm refused for another reason than an outage: its neighbours and other organizations' alarms are stored", async () => {
    const before = await deadLettered('alarm');
    // One sweep's alarms, of two organizations, the poison ones first (as a silent device sits first in the LRU).
    const { raised, sink: s } = sink((key) => (key.startsWith('x-') ? new TypeError('tenant X data the database refuses') : undefined));
    const now = 1_000_000;
    const outbox = new DetectionOutbox(s, createLogger('silent'), 100_000, () => now);
    outbox.add(
      { ...emptyDetections(), alarms: [alarm('x-1', 'X'), alarm('y-deadman', 'Y'), alarm('x-2', 'X'), alarm('x-after', 'X')] },
      true,
    );
    await outbox.drain();
    expect(raised).toEqual(['y-deadman']);
    expect(outbox.size).toBe(0);
    expect(outbox.deadLetterCount).toBe(3);
    expect(outbox.droppedEntries).toBe(0);
    expect((await deadLettered('alarm')) - before).toBe(3);

    // Later detections of both organizations flow while X's dead letters wait.
    outbox.add({ ...emptyDetections(), alarms: [alarm('x-3', 'X'), alarm('y-max-stay', 'Y')] }, true);
    await outbox.drain();
    expect(raised).toEqual(['y-deadman', 'y-max-stay']);
    expect(outbox.deadLetterCount).toBe(4);
  });

  it('retries dead letters later, with a growing delay, until they are stored; none is ever dropped by failing', async () => {
    let refuse = true;
    const { raised, sink: s } = sink((key) => (refuse && key === 'poison' ? new TypeError('bug') : undefined));
    let now = 1_000_000;
    const outbox = new DetectionOutbox(s, createLogger('silent'), 100_000, () => now);
    outbox.add({ ...emptyDetections(), alarms: [alarm('poison'), alarm('next')] }, true);
    await outbox.drain();
    expect(raised).toEqual(['next']);
    await outbox.retryDeadLetters(); // not due yet
    now += 4000;
    await outbox.retryDeadLetters();
    expect(outbox.deadLetterCount).toBe(1);
    const before = await deadLettered('alarm');
    now += 1000; // 5 s: first retry, refused again
    await outbox.retryDeadLetters();
    expect((await deadLettered('alarm')) - before).toBe(1);
    expect(outbox.deadLetterCount).toBe(1);
    now += 9000; // the second waits 10 s
    refuse = false;
    await outbox.retryDeadLetters();
    expect(raised).toEqual(['next']);
    now += 1000;
    for (let attempt = 0; attempt < 20; attempt++) await outbox.retryDeadLetters(); // 20 more looks change nothing
    expect(raised).toEqual(['next', 'poison']);
    expect(outbox.deadLetterCount).toBe(0);
    expect(outbox.droppedEntries).toBe(0);
  });

  it('keeps a dead letter during an outage: a retry that meets one waits for the next', async () => {
    let mode: 'refuse' | 'down' | 'up' = 'refuse';
    const { raised, sink: s } = sink((key) =>
      key !== 'poison' || mode === 'up' ? undefined : mode === 'refuse' ? new TypeError('bug') : new StorageUnavailableError(),
    );
    let now = 0;
    const outbox = new DetectionOutbox(s, createLogger('silent'), 100_000, () => now);
    outbox.add({ ...emptyDetections(), alarms: [alarm('poison')] }, true);
    await outbox.drain();
    mode = 'down';
    now += 5000;
    await outbox.retryDeadLetters();
    expect(outbox.deadLetterCount).toBe(1);
    mode = 'up';
    await outbox.retryDeadLetters(); // still due: the outage did not push it back
    expect(raised).toEqual(['poison']);
  });

  it("does not make one organization's lane wait for another's store", async () => {
    let release!: () => void;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    const { raised, sink: s } = sink(() => undefined);
    const outbox = new DetectionOutbox(
      { ...s, raiseAlarm: async (a) => (a.organizationId === 'X' ? stuck.then(() => s.raiseAlarm(a)) : s.raiseAlarm(a)) },
      createLogger('silent'),
    );
    outbox.add({ ...emptyDetections(), alarms: [alarm('x-slow', 'X'), alarm('y-1', 'Y')] }, true);
    const draining = outbox.drain();
    for (let tick = 0; tick < 10 && !raised.includes('y-1'); tick++) await new Promise((resolve) => setImmediate(resolve));
    expect(raised).toEqual(['y-1']);
    release();
    await draining;
    expect(raised).toEqual(['y-1', 'x-slow']);
  });

  it('drains a few lanes at once, not one per organization, and gets to every lane', async () => {
    let inFlight = 0;
    let most = 0;
    const { raised, sink: s } = sink(() => undefined);
    const slow = async (a: DetectedAlarm) => {
      most = Math.max(most, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 2));
      inFlight--;
      await s.raiseAlarm(a);
    };
    const outbox = new DetectionOutbox({ ...s, raiseAlarm: slow }, createLogger('silent'));
    const organizations = Array.from({ length: 12 }, (_, index) => `org-${index}`);
    outbox.add(
      { ...emptyDetections(), alarms: organizations.map((organizationId) => alarm(`${organizationId}-alarm`, organizationId)) },
      true,
    );
    await outbox.drain();
    expect(raised.sort()).toEqual(organizations.map((organizationId) => `${organizationId}-alarm`).sort());
    expect(most).toBe(4);
  });

  it("sets aside refused zone events, and still stores the entry's alarms and announces the rest", async () => {
    const before = await deadLettered('zone_events');
    const { raised, zoneEvents, announced, sink: s } = sink((key) => (key === 'zone|evil' ? new TypeError('refused') : undefined));
    const outbox = new DetectionOutbox(s, createLogger('silent'));
    outbox.add({ zoneEvents: [zoneEvent('X', 'evil'), zoneEvent('Y', 'walker')], alarms: [alarm('x-1', 'X')], triggered: [] }, false);
    await outbox.drain();
    expect(zoneEvents).toEqual(['walker']);
    expect(raised).toEqual(['x-1']);
    expect(outbox.deadLetterCount).toBe(1);
    expect((await deadLettered('zone_events')) - before).toBe(1);
    expect(announced.sort()).toEqual([0, 1]);
  });

  it('when the cap drops the entry being stored, stores the next one all the same', async () => {
    let release!: () => void;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    const { raised, sink: s } = sink(() => undefined);
    const outbox = new DetectionOutbox(
      { ...s, raiseAlarm: async (a) => (a.idempotencyKey === 'first' ? stuck.then(() => s.raiseAlarm(a)) : s.raiseAlarm(a)) },
      createLogger('silent'),
      2,
    );
    outbox.add({ ...emptyDetections(), alarms: [alarm('first')] }, true);
    const draining = outbox.drain();
    outbox.add({ ...emptyDetections(), alarms: [alarm('second')] }, true);
    outbox.add({ ...emptyDetections(), alarms: [alarm('third')] }, true); // over the cap: 'first', being stored, is dropped
    expect(outbox.droppedEntries).toBe(1);
    release();
    await draining;
    await outbox.drain();
    expect(raised).toEqual(['first', 'second', 'third']);
    expect(outbox.size).toBe(0);
  });

  it('is bounded: past its cap the oldest entry of the longest lane is dropped and counted', () => {
    const { sink: s } = sink(() => new StorageUnavailableError());
    const outbox = new DetectionOutbox(s, createLogger('silent'), 3);
    outbox.add({ ...emptyDetections(), alarms: [alarm('y', 'Y')] }, true);
    for (const key of ['x1', 'x2', 'x3']) outbox.add({ ...emptyDetections(), alarms: [alarm(key, 'X')] }, true);
    expect(outbox.size).toBe(3);
    expect(outbox.droppedEntries).toBe(1);
  });
});

describe('DetectionOutbox: one organization at a time (issue 28 item 6)', () => {
  it("stores one organization's lane without waiting for another's, and counts each apart", async () => {
    const { sink: store, raised } = sink(() => undefined);
    let releaseA!: () => void;
    const heldA = new Promise<void>((resolve) => (releaseA = resolve));
    const outbox = new DetectionOutbox(
      {
        ...store,
        // Tenant A's storing hangs (its lane is long); tenant B's goes through.
        raiseAlarm: async (a: DetectedAlarm) => (a.organizationId === 'tenant-a' ? await heldA : undefined, store.raiseAlarm(a)),
      },
      createLogger('silent'),
    );
    outbox.add({ ...emptyDetections(), alarms: [alarm('a1', 'tenant-a'), alarm('b1', 'tenant-b')] }, false);
    await outbox.drain(new Set(['tenant-b']));
    expect(raised).toEqual(['b1']);
    expect(outbox.sizeOf(new Set(['tenant-b']))).toBe(0);
    expect(outbox.sizeOf(new Set(['tenant-a']))).toBe(1);
    expect(outbox.size).toBe(1);
    releaseA();
    await outbox.drain();
    expect(raised).toEqual(['b1', 'a1']);
    expect(outbox.size).toBe(0);
  });

  it('answers storedThrough once what waited at the call is stored, not what detection added meanwhile; false at an outage', async () => {
    let down = false;
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const { raised, sink: s } = sink((key) => (down && key === 'late-2' ? new StorageUnavailableError() : undefined));
    const slow = {
      ...s,
      raiseAlarm: async (a: DetectedAlarm) => {
        if (a.idempotencyKey === 'b') await held;
        await s.raiseAlarm(a);
      },
    };
    const outbox = new DetectionOutbox(slow, createLogger('silent'));
    outbox.add({ ...emptyDetections(), alarms: [alarm('a')] }, true);
    const through = outbox.storedThrough(new Set(['org']));
    // Added after the call (and held up in storage): not waited for.
    outbox.add({ ...emptyDetections(), alarms: [alarm('b')] }, true);
    expect(await through).toBe(true);
    expect(raised).toEqual(['a']);
    expect(outbox.size).toBe(1);
    release();
    await outbox.drain();
    expect(raised).toEqual(['a', 'b']);

    expect(await outbox.storedThrough(new Set(['org']))).toBe(true); // nothing waits
    down = true;
    outbox.add({ ...emptyDetections(), alarms: [alarm('late-1'), alarm('late-2')] }, true);
    expect(await outbox.storedThrough(new Set(['org']))).toBe(false);
    expect(raised).toEqual(['a', 'b', 'late-1']);
    down = false;
    expect(await outbox.storedThrough(new Set(['org']))).toBe(true);
    expect(raised).toEqual(['a', 'b', 'late-1', 'late-2']);
  });
});

describe('DetectionOutbox: zone events stored in parts (issue 28 item 6)', () => {
  const many = (organizationId: string, count: number, name = (i: number) => `d${i}`) =>
    Array.from({ length: count }, (_, i) => zoneEvent(organizationId, name(i)));

  it("stores a large entry's zone events in parts, resumes after the last part stored when an outage stops it, announces once", async () => {
    let outages = 1;
    const parts: number[] = [];
    const { zoneEvents, announced, sink: s } = sink(() => undefined);
    const outbox = new DetectionOutbox(
      {
        ...s,
        storeZoneEvents: async (events) => {
          parts.push(events.length);
          // The second part meets an outage, once.
          if (parts.length === 2 && outages-- > 0) throw new StorageUnavailableError();
          await s.storeZoneEvents(events);
        },
      },
      createLogger('silent'),
    );
    const count = ZONE_EVENTS_PER_STORE * 2 + 100;
    outbox.add({ ...emptyDetections(), zoneEvents: many('X', count) }, false);
    await outbox.drain();
    expect(zoneEvents).toHaveLength(ZONE_EVENTS_PER_STORE);
    expect(announced).toEqual([]);
    expect(outbox.size).toBe(1);
    await outbox.drain();
    expect(parts).toEqual([ZONE_EVENTS_PER_STORE, ZONE_EVENTS_PER_STORE, ZONE_EVENTS_PER_STORE, 100]);
    // Each stored exactly once, in order, and the entry announced once with all of them.
    expect(zoneEvents).toEqual(many('X', count).map((event) => event.deviceId));
    expect(announced).toEqual([count]);
    expect(outbox.size).toBe(0);
  });

  it('sets aside only the refused part: the parts before and after it are stored and announced', async () => {
    const { zoneEvents, announced, sink: s } = sink((key) => (key === 'zone|evil' ? new TypeError('refused') : undefined));
    const outbox = new DetectionOutbox(s, createLogger('silent'));
    const count = ZONE_EVENTS_PER_STORE * 2 + 100;
    // The one refused event is in the second part.
    const events = many('X', count, (i) => (i === ZONE_EVENTS_PER_STORE + 5 ? 'evil' : `d${i}`));
    outbox.add({ ...emptyDetections(), zoneEvents: events }, false);
    await outbox.drain();
    expect(zoneEvents).toHaveLength(ZONE_EVENTS_PER_STORE + 100);
    expect(zoneEvents).not.toContain('evil');
    expect(outbox.deadLetterCount).toBe(1);
    expect(announced).toEqual([ZONE_EVENTS_PER_STORE + 100]);
    expect(outbox.size).toBe(0);
  });
});
