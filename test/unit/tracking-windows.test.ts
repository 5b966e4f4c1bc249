import { describe, expect, it } from 'vitest';
import { TrackingWindows, trackingWindowStep } from '../../gateway/privacy/tracking-windows.js';
import type { PositionBatch } from '../../gateway/pipeline/position-batch.js';
import type { Principal } from '../../gateway/auth/principal.js';
import { LocalBus } from '../../shared/bus/local-bus.js';
import type { Channels } from '../../gateway/bus-channels.js';
import type { TrackingSchedule } from '../../shared/privacy/tracking-schedule.js';

const ORG = '00000000-0000-4000-8000-000000000001';
const ALICE = '00000000-0000-4000-8000-0000000000a1';
const BOB = '00000000-0000-4000-8000-0000000000b0';
/** Tracked from 00:00 to 12:00 UTC on Mondays only. */
const MONDAY_MORNINGS: TrackingSchedule = { time_zone: 'UTC', weekly: [{ day: 'mon', from: '00:00', to: '12:00' }], exceptions: [] };
const MONDAY = Date.parse('2026-11-23T00:00:00Z');
const principal: Principal = {
  userId: ALICE,
  email: 'a@x',
  organizationId: ORG,
  role: 'admin',
  platformAdmin: false,
  permission: 'read-write',
  via: 'jwt',
};

/** A stand-in for storage: the schedules by user, and every query it was asked. */
function fakeStorage(schedules: Map<string, TrackingSchedule | null>) {
  const queries: string[][] = [];
  return {
    queries,
    execute: async <T>(_sql: string, params: readonly unknown[] = []) => {
      const ids = String(params[1]).replace(/[{}"]/g, '').split(',');
      queries.push(ids);
      return ids.map((id) => ({ user_id: id, schedule: schedules.get(id) ?? null })) as T[];
    },
  };
}

function batchOf(poses: { userId: string | null; at: number; danger?: boolean }[]): PositionBatch {
  return {
    principal,
    items: [],
    receivedAt: MONDAY,
    poses: poses.map((pose) => ({ device_id: 'd', timestamp: pose.at, danger: pose.danger }) as PositionBatch['poses'][number]),
    records: poses.map(
      (pose) => ({ organizationId: ORG, deviceId: 'd', userId: pose.userId, timestamp: pose.at }) as PositionBatch['records'][number],
    ),
    errors: [],
  };
}

describe('tracking windows cache and pipeline step', () => {
  it('reads each user once, in one query per upload, however many positions', async () => {
    const storage = fakeStorage(new Map([[ALICE, MONDAY_MORNINGS]]));
    const windows = new TrackingWindows(storage, new LocalBus<Channels>());
    const step = trackingWindowStep(windows);
    const poses = Array.from({ length: 100 }, (_, index) => ({ userId: index % 2 ? ALICE : BOB, at: MONDAY + index * 600_000 }));
    const batch = batchOf(poses);
    await step.run(batch);
    expect(storage.queries).toEqual([[BOB, ALICE]]); // in order of first appearance
    // Alice's taken before noon (10-minute steps from midnight: indexes below 72), and all of Bob's (no window).
    const expected = poses.filter((pose) => pose.userId === BOB || pose.at < MONDAY + 12 * 3_600_000);
    expect(batch.records.map((record) => [record.userId, record.timestamp])).toEqual(expected.map((pose) => [pose.userId, pose.at]));
    expect(batch.poses.map((pose) => pose.timestamp)).toEqual(expected.map((pose) => pose.at));
    await step.run(batchOf(poses));
    expect(storage.queries).toHaveLength(1);
  });

  it('always keeps an alarm-button pose and a pose with no user', async () => {
    const windows = new TrackingWindows(fakeStorage(new Map([[ALICE, MONDAY_MORNINGS]])), new LocalBus<Channels>());
    const batch = batchOf([
      { userId: ALICE, at: MONDAY + 20 * 3_600_000 },
      { userId: ALICE, at: MONDAY + 20 * 3_600_000, danger: true },
      { userId: null, at: MONDAY + 20 * 3_600_000 },
    ]);
    await trackingWindowStep(windows).run(batch);
    expect(batch.records.map((record) => record.userId)).toEqual([ALICE, null]);
    expect(batch.poses.map((pose) => pose.danger)).toEqual([true, undefined]);
  });

  it('drops a changed user on every gateway sharing the bus, and an organization on a group change', async () => {
    const schedules = new Map<string, TrackingSchedule | null>();
    const bus = new LocalBus<Channels>();
    const here = fakeStorage(schedules);
    const there = fakeStorage(schedules);
    const [gatewayA, gatewayB] = [new TrackingWindows(here, bus), new TrackingWindows(there, bus)];
    await gatewayA.start();
    await gatewayB.start();
    expect((await gatewayB.schedules(ORG, [ALICE, BOB])).get(ALICE)).toBeNull();
    schedules.set(ALICE, MONDAY_MORNINGS);
    await gatewayA.changed({ organizationId: ORG, userId: ALICE });
    await new Promise((resolve) => setImmediate(resolve));
    expect((await gatewayB.schedules(ORG, [ALICE, BOB])).get(ALICE)).toEqual(MONDAY_MORNINGS);
    expect(there.queries).toEqual([[ALICE, BOB], [ALICE]]);
    await gatewayA.changed({ organizationId: ORG });
    await new Promise((resolve) => setImmediate(resolve));
    await gatewayB.schedules(ORG, [ALICE, BOB]);
    expect(there.queries.at(-1)).toEqual([ALICE, BOB]);
  });

  it('reads again past the TTL, should a message be lost', async () => {
    let now = 0;
    const storage = fakeStorage(new Map());
    const windows = new TrackingWindows(storage, new LocalBus<Channels>(), 1000, () => now);
    await windows.schedules(ORG, [ALICE]);
    now = 999;
    await windows.schedules(ORG, [ALICE]);
    now = 1000;
    await windows.schedules(ORG, [ALICE]);
    expect(storage.queries).toHaveLength(2);
  });
});
