import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registry } from '../../shared/metrics/metrics.js';
import { createVenue } from '../../testkit/cartography.js';
import { EventTimeVenue } from '../../testkit/event-time.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const detailsOf = (details: unknown): Record<string, unknown> =>
  typeof details === 'string' ? JSON.parse(details) : (details as Record<string, unknown>);

/**
 * Issue 30: fixes uploaded late (a buffer sent after the device's live fix) give the enters, exits and max-stay
 * alarms they imply, in event time; what the live path got wrong meanwhile is superseded by its correction.
 */
describe(`event time: late fixes (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: EventTimeVenue;
  let ward: string;
  let store: string;

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    const created = await createVenue(admin, 'Event time venue');
    venue = new EventTimeVenue(running, admin, created.building.id, created.floors[0].id);
    ward = await venue.fence('Ward', 10, 10, 10, { max_stay_time: 60 });
    store = await venue.fence('Store', 40, 10, 10);
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('detects a buffer sent newest first after the live fix in fix-time order, and supersedes the exit the live fix implied', async () => {
    const t0 = Date.now() - 30 * 60_000;
    const s = (seconds: number) => t0 + seconds * 1000;
    await venue.upload([venue.pose('nf', s(0), 15, 15)]);
    await venue.settle();
    // Back online: the live fix first (outside both), then the buffer, newest first.
    await venue.upload([venue.pose('nf', s(50), 60, 15)]);
    await venue.settle();
    const wrong = (await venue.zoneEvents('nf')).find((event) => event.type === 'exit');
    expect(wrong?.at_ms).toBe(s(50));
    await venue.upload([
      venue.pose('nf', s(40), 60, 15),
      venue.pose('nf', s(30), 45, 15),
      venue.pose('nf', s(20), 45, 15),
      venue.pose('nf', s(10), 30, 15),
    ]);
    await venue.settle();

    const events = await venue.zoneEvents('nf');
    const standing = events.filter((event) => !event.superseded);
    expect(standing.map((event) => [event.type, event.zone_id, event.at_ms])).toEqual([
      ['enter', ward, s(0)],
      ['exit', ward, s(10)],
      ['enter', store, s(20)],
      ['exit', store, s(40)],
    ]);
    expect(events.find((event) => event.id === wrong!.id)?.superseded).toBe(true);
    const correction = standing.find((event) => event.type === 'exit' && event.zone_id === ward)!;
    expect(correction).toMatchObject({ late: true, supersedes: wrong!.id });
    expect(correction.delay_ms).toBeGreaterThan(29 * 60_000);
    expect(standing[0]).toMatchObject({ late: false, supersedes: null });

    // The live position stays the newest fix's.
    const live = await admin.get(`/api/v1/realtime/positions?building_ids=${venue.buildingId}&device_ids=nf`);
    expect(live.status).toBe(200);
    expect(live.body.features[0].properties).toMatchObject({ time: new Date(s(50)).toISOString(), local_coordinates: [60, 15] });

    // The building's watermark, late fixes and corrections, as /metrics publishes them.
    const building = String(venue.buildingId);
    const sampled = async (name: string) =>
      (await registry.getSingleMetric(name)!.get()).values.find((value) => value.labels.building_id === building)?.value ?? 0;
    expect(await sampled('floorcast_detection_late_fixes_total')).toBeGreaterThanOrEqual(4);
    expect(await sampled('floorcast_detection_corrections_total')).toBeGreaterThanOrEqual(1);
    expect(await sampled('floorcast_detection_watermark_seconds')).toBeGreaterThanOrEqual(s(50) / 1000);
  });

  it('raises the max stay a late buffer shows ran over, dated in the past and flagged late', async () => {
    const t0 = Date.now() - 20 * 60_000;
    const s = (seconds: number) => t0 + seconds * 1000;
    await venue.upload([venue.pose('ms', s(0), 15, 15)]);
    await venue.settle();
    await venue.upload([venue.pose('ms', s(110), 60, 15)]);
    await venue.settle();
    expect(await venue.maxStays('ms')).toEqual([]);
    // The buffer, oldest first: inside until 90 s (over the 60 s limit from 61 s), out at 100 s.
    await venue.upload([
      venue.pose('ms', s(30), 15, 15),
      venue.pose('ms', s(61), 15, 15),
      venue.pose('ms', s(90), 15, 15),
      venue.pose('ms', s(100), 60, 15),
    ]);
    await venue.settle();

    const alarms = await venue.maxStays('ms');
    expect(alarms).toHaveLength(1);
    expect(alarms[0]!.geofence_id).toBe(ward);
    expect(detailsOf(alarms[0]!.details)).toMatchObject({
      entered_at: new Date(s(0)).toISOString(),
      occurred_at: new Date(s(61)).toISOString(),
      late: true,
    });
    const standing = (await venue.zoneEvents('ms')).filter((event) => !event.superseded);
    expect(standing.map((event) => [event.type, event.at_ms])).toEqual([
      ['enter', s(0)],
      ['exit', s(100)],
    ]);
  });

  it('keeps showing the later stay when a late buffer raises an earlier one into its open alarm, and counts it', async () => {
    const t0 = Date.now() - 40 * 60_000;
    const s = (seconds: number) => t0 + seconds * 1000;
    await venue.upload([venue.pose('fo', s(0), 60, 15)]);
    await venue.settle();
    // Back online after a first stay in the ward: a second stay, on time, runs over (entered at 300 s).
    await venue.upload([venue.pose('fo', s(300), 15, 15)]);
    await venue.upload([venue.pose('fo', s(340), 15, 15)]);
    await venue.upload([venue.pose('fo', s(380), 15, 15)]);
    await venue.settle();
    const shown = { entered_at: new Date(s(300)).toISOString(), occurred_at: new Date(s(380)).toISOString() };
    expect((await venue.maxStays('fo')).map((alarm) => detailsOf(alarm.details))).toMatchObject([shown]);
    // The buffer of the offline minutes: the first stay (100-200 s) ran over too, and folds into the alarm still OPEN.
    await venue.upload([
      venue.pose('fo', s(100), 15, 15),
      venue.pose('fo', s(161), 15, 15),
      venue.pose('fo', s(200), 15, 15),
      venue.pose('fo', s(210), 60, 15),
    ]);
    await venue.settle();

    const alarms = await running.gateway.services.storage.execute<{ details: unknown; occurrences: number; x: number }>(
      `select details, occurrences, x from alarms where device_id = 'fo' and type = 'GEOFENCE_MAX_STAY_TIME'`,
    );
    expect(alarms).toHaveLength(1);
    expect(alarms[0]!.occurrences).toBe(2);
    // What it shows is the later stay in event time, its place included, whatever order the two reached us in.
    expect(detailsOf(alarms[0]!.details)).toMatchObject(shown);
    expect(detailsOf(alarms[0]!.details).late).not.toBe(true);
    expect(Number(alarms[0]!.x)).toBe(15);
    const raises = await running.gateway.services.storage.execute<{ details: unknown }>(
      `select k.details from alarm_raise_keys k join alarms a on a.id = k.alarm_id where a.device_id = 'fo'`,
    );
    expect(raises.map((raise) => detailsOf(raise.details).entered_at).sort()).toEqual(
      [new Date(s(100)).toISOString(), new Date(s(300)).toISOString()].sort(),
    );
  });

  it('withdraws a max-stay alarm that a part of the buffer implied and an older part contradicts', async () => {
    const t0 = Date.now() - 15 * 60_000;
    const s = (seconds: number) => t0 + seconds * 1000;
    await venue.upload([venue.pose('chunks', s(0), 15, 15)]);
    await venue.upload([venue.pose('chunks', s(200), 60, 15)]);
    // The later part first: still in the ward at 80 s, seemingly since 0 s: over the limit.
    await venue.upload([venue.pose('chunks', s(80), 15, 15), venue.pose('chunks', s(90), 15, 15)]);
    await venue.settle();
    const implied = await venue.maxStays('chunks');
    expect(implied.map((alarm) => [alarm.state, detailsOf(alarm.details).entered_at])).toEqual([['OPEN', new Date(s(0)).toISOString()]]);
    // Then the older part: out at 30 s, back at 50 s: the stay at 90 s was 40 s long.
    await venue.upload([venue.pose('chunks', s(30), 60, 15), venue.pose('chunks', s(50), 15, 15)]);
    await venue.settle();
    const after = await venue.maxStays('chunks');
    expect(after).toHaveLength(1);
    expect(after[0]!.state).toBe('CLOSED');
    expect(detailsOf(after[0]!.details).superseded).toBe(true);
    const standing = (await venue.zoneEvents('chunks')).filter((event) => !event.superseded);
    expect(standing.map((event) => [event.type, event.at_ms])).toEqual([
      ['enter', s(0)],
      ['exit', s(30)],
      ['enter', s(50)],
      ['exit', s(200)],
    ]);
  });

  it('ends an exit grace under way when the device went offline as it would have on time', async () => {
    const lobby = await venue.fence('Lobby', 70, 10, 10, { exit_grace_s: 19 });
    const t0 = Date.now() - 12 * 60_000;
    const s = (seconds: number) => t0 + seconds * 1000;
    await venue.upload([venue.pose('grace', s(0), 75, 15), venue.pose('grace', s(10), 75, 15), venue.pose('grace', s(20), 90, 15)]);
    await venue.settle();
    // Out since 20 s when it went offline; the live fix, still out at 100 s, settles that exit (its grace ran out).
    await venue.upload([venue.pose('grace', s(100), 90, 15)]);
    await venue.settle();
    expect((await venue.zoneEvents('grace')).map((event) => [event.type, event.at_ms])).toEqual([
      ['enter', s(0)],
      ['exit', s(20)],
    ]);
    // The buffer: back in at 30 s, within the grace, so the device left at 40 s, not at 20 s.
    await venue.upload([venue.pose('grace', s(30), 75, 15), venue.pose('grace', s(40), 90, 15), venue.pose('grace', s(50), 90, 15)]);
    await venue.settle();
    const events = await venue.zoneEvents('grace');
    expect(events.filter((event) => !event.superseded).map((event) => [event.type, event.zone_id, event.at_ms])).toEqual([
      ['enter', lobby, s(0)],
      ['exit', lobby, s(40)],
    ]);
    const wrong = events.find((event) => event.at_ms === s(20))!;
    expect(wrong.superseded).toBe(true);
    expect(events.find((event) => event.at_ms === s(40))).toMatchObject({ late: true, supersedes: wrong.id });
  });

  it('withdraws a max stay a sweep raised while the device was quiet when its next fixes show it left in time', async () => {
    const bay = await venue.fence('Bay', 70, 40, 10, { max_stay_time: 55 });
    const t0 = Date.now() - 8 * 60_000;
    const s = (seconds: number) => t0 + seconds * 1000;
    await venue.upload([venue.pose('quiet', s(0), 75, 45), venue.pose('quiet', s(50), 75, 45)]);
    // Quiet since its fix at 50 s: a sweep carries its clock on, and past 55 s in the bay raises the max stay.
    const deadline = Date.now() + 30_000;
    while ((await venue.maxStays('quiet')).length === 0) {
      if (Date.now() > deadline) throw new Error('no max stay from the sweep');
      await sleep(100);
    }
    // Its next fixes, newer than any detected but older than the sweep's clock: it had left at 52 s.
    await venue.upload([venue.pose('quiet', s(52), 90, 45), venue.pose('quiet', s(53), 90, 45)]);
    await venue.settle();
    const [alarm] = await venue.maxStays('quiet');
    expect(alarm).toMatchObject({ state: 'CLOSED', geofence_id: bay });
    expect(detailsOf(alarm!.details).superseded).toBe(true);
    expect((await venue.zoneEvents('quiet')).filter((event) => !event.superseded).map((event) => [event.type, event.at_ms])).toEqual([
      ['enter', s(0)],
      ['exit', s(52)],
    ]);
  });

  it('keeps a max stay that went over during an exit grace, found live only later, through a later replay that starts after it', async () => {
    const hall = await venue.fence('Hall', 100, 10, 10, { max_stay_time: 119, exit_grace_s: 29 });
    const t0 = Date.now() - 6 * 60_000;
    const s = (seconds: number) => t0 + seconds * 1000;
    await venue.upload([venue.pose('regrace', s(0), 105, 15)]);
    await venue.settle();
    // The live fix, in the hall since 0 s as far as the live path knows: over the limit, raised at 160 s.
    await venue.upload([venue.pose('regrace', s(160), 105, 15)]);
    await venue.settle();
    // The buffer: out at 100 s; the stay went over at 120 s, during the grace (the fix at 125 s finds it); back in at 160 s.
    await venue.upload([
      venue.pose('regrace', s(20), 105, 15),
      venue.pose('regrace', s(100), 90, 15),
      venue.pose('regrace', s(125), 90, 15),
    ]);
    await venue.settle();
    // Out again at 200 s, then a late fix from 180 s: its replay starts after 125 s (the grace before it), after the
    // stay went over but before the live path found it. The raise it cannot find again is not its to withdraw.
    await venue.upload([venue.pose('regrace', s(200), 90, 15)]);
    await venue.upload([venue.pose('regrace', s(180), 105, 15)]);
    await venue.settle();
    const alarms = await venue.maxStays('regrace');
    expect(
      alarms.map((alarm) => [alarm.state, alarm.geofence_id, detailsOf(alarm.details).entered_at, detailsOf(alarm.details).superseded]),
    ).toEqual([['OPEN', hall, new Date(s(0)).toISOString(), undefined]]);
    expect((await venue.zoneEvents('regrace')).filter((event) => !event.superseded).map((event) => [event.type, event.at_ms])).toEqual([
      ['enter', s(0)],
      ['exit', s(100)],
      ['enter', s(160)],
    ]);
  });

  it('raises a DANGER pressed while offline at once, dated by the press and flagged late', async () => {
    const pressedAt = Date.now() - 10 * 60_000;
    await venue.upload([venue.pose('pressed', Date.now() - 1000, 60, 15)]);
    await venue.upload([{ ...venue.pose('pressed', pressedAt, 15, 15), danger: true }]);
    const [alarm] = await running.gateway.services.storage.execute<{ details: unknown }>(
      "select details from alarms where device_id = 'pressed' and type = 'DANGER'",
    );
    expect(detailsOf(alarm!.details)).toMatchObject({ source: 'pose', occurred_at: new Date(pressedAt).toISOString(), late: true });
    expect(detailsOf(alarm!.details).delay_ms).toBeGreaterThan(9 * 60_000);
  });

  it('produces nothing twice: the same buffer uploaded again changes nothing', async () => {
    const t0 = Date.now() - 10 * 60_000;
    const s = (seconds: number) => t0 + seconds * 1000;
    await venue.upload([venue.pose('again', s(0), 15, 15)]);
    await venue.upload([venue.pose('again', s(50), 60, 15)]);
    const buffer = [venue.pose('again', s(10), 30, 15), venue.pose('again', s(20), 45, 15), venue.pose('again', s(40), 60, 15)];
    await venue.upload(buffer);
    await venue.settle();
    const once = await venue.zoneEvents('again');
    await venue.upload(buffer);
    await venue.settle();
    expect(await venue.zoneEvents('again')).toEqual(once);
    expect(once.filter((event) => !event.superseded).map((event) => [event.type, event.at_ms])).toEqual([
      ['enter', s(0)],
      ['exit', s(10)],
      ['enter', s(20)],
      ['exit', s(40)],
    ]);
  });
});
