import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DetectionEngine } from '../../gateway/detection/detection-engine.js';
import { DetectorStateLoader } from '../../gateway/detection/detector-state-loader.js';
import { PositionStore } from '../../shared/positions/position-store.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Long enough for a gateway to stop and start again before it is due, short enough for a test. */
const SILENCE_S = 8;

/**
 * A gateway restarted on the same storage keeps the dead-man and max-stay coverage of the devices it tracked:
 * it rebuilds their detector state from stored positions, zone events and alarms, raises what fell due while it
 * was down once, and nothing already raised again.
 */
describe(`detector state rebuilt across gateway restarts (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  let longStay: { id: string };
  let shortStay: { id: string };

  const storage = () => running.gateway.services.storage;
  const at = (deviceId: string, x: number, y: number) => ({
    device_id: deviceId,
    timestamp: Date.now(),
    building_id: venue.building.id,
    floor_id: venue.floors[0].id,
    x,
    y,
  });
  const upload = async (...poses: object[]) => expect((await admin.post('/api/v1/realtime/positions', { poses })).status).toBe(204);
  const alarmsOf = (deviceId: string) =>
    storage().execute<{ type: string; occurrences: number; created_at: Date | string; details: { reason?: string } }>(
      'select type, occurrences, created_at, details from alarms where device_id = ? order by type',
      [deviceId],
    );
  const zoneEventsOf = (deviceId: string) =>
    storage().execute<{ type: string; zone_id: string }>(
      "select type, zone_id from zone_events where device_id = ? and zone_kind = 'geofence' order by at, fired_at, ctid",
      [deviceId],
    );
  const until = async <T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 25_000): Promise<T> => {
    for (const started = Date.now(); ; await sleep(100)) {
      const value = await read();
      if (done(value) || Date.now() - started > timeoutMs) return value;
    }
  };
  /** Stops the gateway as SIGTERM would and starts a new one on the same storage; resolves with the time in between. */
  const restart = async (): Promise<number> => {
    await running.gateway.close();
    const stoppedAt = Date.now();
    running = await startTestGateway({}, {}, running.environment);
    admin = await adminClient(running.client);
    return stoppedAt;
  };

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Rebuild venue');
    expect((await admin.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, { deadman_silence_s: SILENCE_S })).status).toBe(200);
    const fence = (x: number, maxStay: number) =>
      admin.post('/api/v1/geofences', {
        name: `Stay ${maxStay}`,
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'CIRCLE',
        cartesians: [[x, 40]],
        radius: 4,
        max_stay_time: maxStay,
      });
    longStay = (await fence(40, SILENCE_S)).body;
    shortStay = (await fence(80, 1)).body;
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('raises the dead-man and max-stay alarms that fell due during a restart once, and never again after the next', async () => {
    await upload(at('stayer', 40, 40), at('walker', 41, 40));
    await upload(at('walker', 10, 10));
    await until(
      () => zoneEventsOf('walker'),
      (rows) => rows.length === 2,
    );
    expect(await alarmsOf('stayer')).toEqual([]);
    const stoppedAt = await restart();

    const raised = await until(
      () => alarmsOf('stayer'),
      (rows) => rows.length === 2,
    );
    expect(raised.map((row) => [row.type, row.occurrences, row.details.reason])).toEqual([
      ['DEADMAN', 1, 'silence'],
      ['GEOFENCE_MAX_STAY_TIME', 1, undefined],
    ]);
    // Raised by the new gateway: the old one was gone before either was due.
    for (const row of raised) expect(new Date(row.created_at).getTime()).toBeGreaterThanOrEqual(stoppedAt);
    const events = async () =>
      (
        await storage().execute<{ n: number }>(
          "select count(*)::int as n from alarm_events e join alarms a on a.id = e.alarm_id where a.device_id = 'stayer'",
        )
      )[0]!.n;
    const eventsBefore = await events();

    await restart();
    await sleep(2500); // a few sweeps of the third gateway
    expect((await alarmsOf('stayer')).map((row) => [row.type, row.occurrences])).toEqual([
      ['DEADMAN', 1],
      ['GEOFENCE_MAX_STAY_TIME', 1],
    ]);
    expect(await events()).toBe(eventsBefore);

    // Zone state came back too: the stayer is still inside (no second enter), the walker still outside (no second exit).
    await upload(at('stayer', 40.5, 40), at('walker', 12, 12));
    await upload(at('walker', 40, 40));
    await until(
      () => zoneEventsOf('walker'),
      (rows) => rows.length === 3,
    );
    expect((await zoneEventsOf('walker')).map((row) => row.type)).toEqual(['enter', 'exit', 'enter']);
    expect((await zoneEventsOf('stayer')).map((row) => [row.type, row.zone_id])).toEqual([['enter', longStay.id]]);
  });

  it('does not alarm again a stay whose alarm was raised before the restart', async () => {
    await upload(at('sitter', 80, 40));
    await until(
      () => alarmsOf('sitter'),
      (rows) => rows.some((row) => row.type === 'GEOFENCE_MAX_STAY_TIME'),
    );
    await restart();
    await sleep(2500);
    const stays = (await alarmsOf('sitter')).filter((row) => row.type === 'GEOFENCE_MAX_STAY_TIME');
    expect(stays.map((row) => row.occurrences)).toEqual([1]);
    expect((await zoneEventsOf('sitter')).map((row) => [row.type, row.zone_id])).toEqual([['enter', shortStay.id]]);
  });

  it('rebuilds a building from exactly the devices last seen in it recently, replacing what was held, stays included', async () => {
    const other = await createVenue(admin, 'Rebuild annex');
    const fence = (
      await admin.post('/api/v1/geofences', {
        name: 'Annex room',
        building_id: other.building.id,
        floor_id: other.floors[0].id,
        type: 'CIRCLE',
        cartesians: [[30, 30]],
        radius: 4,
      })
    ).body;
    const pose = (deviceId: string, building: typeof other, x: number) => ({
      device_id: deviceId,
      timestamp: Date.now(),
      building_id: building.building.id,
      floor_id: building.floors[0].id,
      x,
      y: 30,
    });
    const inside = pose('l-inside', other, 30);
    await upload(inside, pose('l-outside', other, 60), pose('l-moved', other, 60));
    await upload(pose('l-moved', venue, 60));
    const [{ organization_id: organizationId }] = await storage().execute<{ organization_id: string }>(
      'select organization_id from buildings where id = ?',
      [other.building.id],
    );
    // Seen in the annex two hours ago only: past the engine's forget window.
    const hoursAgo = Date.now() - 2 * 3600_000;
    const record = (deviceId: string, x: number, receivedAt: number): PositionRecord => ({
      organizationId,
      deviceId,
      userId: null,
      buildingId: other.building.id,
      floorId: other.floors[0].id,
      indoor: true,
      x,
      y: 30,
      lat: 40.4,
      lng: -3.7,
      yaw: 0,
      accuracy: 1,
      timestamp: receivedAt,
      receivedAt,
    });
    await new PositionStore(storage()).insert([record('l-old', 30, hoursAgo)]);
    await until(
      () => zoneEventsOf('l-inside'),
      (rows) => rows.length === 1,
    );

    const { registry, logger } = running.gateway.services;
    const engine = new DetectionEngine(registry, 3600_000);
    const loader = new DetectorStateLoader(storage(), engine, registry, logger, { lookbackMs: engine.forgetAfterMs });
    const runtime = await registry.get(organizationId, other.building.id);
    engine.observe(record('l-held', 60, Date.now() - 1000), runtime);
    expect(engine.trackedDevicesIn(other.building.id)).toBe(1);
    expect(await loader.rebuildBuildings(organizationId, [other.building.id])).toBe(2);
    expect(engine.trackedDevicesIn(other.building.id)).toBe(2); // l-inside and l-outside; l-held was never stored
    expect(await loader.rebuildBuildings(organizationId, [other.building.id])).toBe(2);

    // (a) the stored enter is the state: the position that caused it, observed again, emits nothing.
    const again = record('l-inside', 30, Date.now());
    expect(engine.observe({ ...again, timestamp: inside.timestamp }, runtime).zoneEvents).toEqual([]);
    // (b) without the stored enter, the same position emits it, once.
    await storage().execute("delete from zone_events where device_id = 'l-inside'");
    await loader.rebuildBuildings(organizationId, [other.building.id]);
    const replayed = engine.observe({ ...again, timestamp: inside.timestamp }, runtime);
    expect(replayed.zoneEvents.map((event) => [event.type, event.zoneId])).toEqual([['enter', fence.id]]);
    expect(engine.observe({ ...again, timestamp: inside.timestamp }, runtime).zoneEvents).toEqual([]);
  });

  it('keeps an alarmed stillness alarmed across a restart while the device goes on reporting from the same spot', async () => {
    const still = await createVenue(admin, 'Rebuild still');
    expect(
      (
        await admin.put(`/api/v1/buildings/${still.building.id}/alarm_settings`, {
          deadman_after_s: 1,
          deadman_radius_m: 2,
          deadman_silence_s: 60,
        })
      ).status,
    ).toBe(200);
    const lying = () => ({
      device_id: 'lying',
      timestamp: Date.now(),
      building_id: still.building.id,
      floor_id: still.floors[0].id,
      x: 60,
      y: 60,
    });
    await upload(lying());
    await sleep(1200);
    await upload(lying());
    const raised = await until(
      () => alarmsOf('lying'),
      (rows) => rows.length === 1,
    );
    expect(raised.map((row) => [row.type, row.details.reason, row.occurrences])).toEqual([['DEADMAN', 'still', 1]]);
    await restart();
    await upload(lying());
    await sleep(2500);
    await upload(lying());
    await sleep(1500);
    expect((await alarmsOf('lying')).map((row) => [row.type, row.details.reason, row.occurrences])).toEqual([['DEADMAN', 'still', 1]]);
  });
});
