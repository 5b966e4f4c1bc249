import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, adminClient } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { WebhookReceiver } from '../../testkit/webhook-receiver.js';
import { evacuationReportSchema } from '../../shared/evacuations/evacuation-report.js';
import { assemblyPointBody, MusterSimulation, type SimPose } from '../../testkit/muster-simulation.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SEED = Number(process.env.MUSTER_SIM_SEED ?? 31);

/**
 * Issue 31's simulation, seeded (MUSTER_SIM_SEED): 200 people on three floors, an evacuation declared (a drill),
 * 197 walking at their own speeds, upper floors by the stairs, to two assembly points outside the footprint;
 * three stay inside. The roll must reach 197 safe and list exactly the three, with their last positions; a
 * warden marks one safe by hand and rescuers bring the other two out. The evacuation's report (a job) must give
 * the times to 50%, 90% and 100% accounted, the arrivals per point, the hand-marked and the last person as the
 * simulation's own figures say. Fix times are the declaration plus the simulation's offsets (a few minutes at
 * most ahead of the clock, within what uploads accept), so every figure is exact to the millisecond.
 */
describe(`mustering: a simulated evacuation and its report (${driverLabel})`, () => {
  const sim = new MusterSimulation({ ...new MusterSimulation().options, seed: SEED });
  let running: RunningGateway;
  let admin: TestClient;
  let receiver: WebhookReceiver;
  let webhookId: string;
  let floors: number[];
  let building: number;
  let t0: number;
  let evacuationId: string;
  const base = () => `/api/v1/buildings/${building}/evacuations`;
  const userOf = new Map(sim.people.map((person) => [person.device, person.user]));
  const deviceOf = new Map(sim.people.map((person) => [`user:${person.user}`, person.device]));

  const upload = async (poses: readonly SimPose[], at: (pose: SimPose) => number) => {
    const response = await admin.post('/api/v1/realtime/positions', {
      poses: poses.map((pose) => ({
        device_id: pose.device,
        user_id: pose.user,
        timestamp: at(pose),
        building_id: building,
        floor_id: floors[pose.floor],
        x: pose.x,
        y: pose.y,
      })),
    });
    expect(response.status, response.text).toBe(204);
  };
  const roll = async () => {
    const response = await admin.get(`${base()}/${evacuationId}`);
    expect(response.status, response.text).toBe(200);
    return response.body;
  };
  /** Polls the roll until `done` (bounded: detection runs beside other suites on 2 cores). */
  const rollUntil = async (done: (counts: Record<string, number>) => boolean, timeoutMs = 60_000) => {
    let current = await roll();
    for (const started = Date.now(); !done(current.counts) && Date.now() - started < timeoutMs; current = await roll()) await sleep(250);
    return current;
  };

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    running = await startTestGateway({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true' });
    admin = await adminClient(running.client);
    const venue = await createVenue(admin, 'Simulated muster venue');
    building = venue.building.id;
    const second = await admin.post('/api/v1/floors', { building_id: building, level: 2, level_height: 4.5, name: 'Second' });
    expect(second.status, second.text).toBe(201);
    floors = [venue.floors[0].id, venue.floors[1].id, second.body.id];
    for (const point of sim.options.points) {
      const created = await admin.post('/api/v1/geofences', assemblyPointBody(point, building, floors[0]));
      expect(created.status, created.text).toBe(201);
    }
    const hook = await admin.post('/api/v1/webhooks', {
      url: receiver.url('/pager'),
      events: ['evacuation.started', 'evacuation.person_safe', 'evacuation.ended'],
    });
    expect(hook.status, hook.text).toBe(201);
    webhookId = hook.body.id;
  });
  afterAll(async () => {
    await running?.stop();
    await receiver?.close();
  });

  it('declares a drill with all 200 on the roll', async () => {
    const now = Date.now();
    await upload(sim.startPoses(), () => now - 1000);
    const declared = await admin.post(base(), { drill: true, note: 'Simulated drill' });
    expect(declared.status, declared.text).toBe(201);
    evacuationId = declared.body.id;
    t0 = Date.parse(declared.body.started_at);
    expect(declared.body).toMatchObject({ drill: true, active: true });
    expect(declared.body.counts).toMatchObject({ on_roll: 200, missing: 200 });
  });

  it('marks the 197 walkers safe at their points and lists exactly the three who stayed, with their last positions', async () => {
    let lastOffset = 0;
    for (const poses of sim.ticks()) {
      await upload(poses, (pose) => t0 + pose.offsetMs);
      lastOffset = poses[0]!.offsetMs;
    }
    expect(lastOffset).toBeLessThan(4 * 60_000); // fix times stay within the 5 minutes ahead an upload accepts
    const current = await rollUntil((counts) => counts.safe >= 197);
    expect(current.counts).toEqual({ on_roll: 200, missing: 3, safe: 197, safe_manual: 0, left_site: 0, not_found: 0, arrivals: 0 });
    // By floor, ground first; each at the last place it reported.
    const stayers = [...sim.stayers].sort((a, b) => a.floor - b.floor);
    expect(current.missing.map((entry: { entry: string }) => deviceOf.get(entry.entry))).toEqual(stayers.map((person) => person.device));
    for (const entry of current.missing) {
      const last = sim.lastPose.get(deviceOf.get(entry.entry)!)!;
      expect(entry.last_position).toMatchObject({
        floor_id: floors[last.floor],
        x: last.x,
        y: last.y,
        fix_at: new Date(t0 + last.offsetMs).toISOString(),
      });
    }
    // Each walker accounted at the point and fix time the simulation saw them reach.
    for (const entry of current.roll.filter((e: { status: string }) => e.status === 'safe')) {
      const arrival = sim.arrivals.get(deviceOf.get(entry.entry)!)!;
      expect(entry.assembly_point.name).toBe(arrival.point);
      expect(entry.status_at).toBe(new Date(t0 + arrival.offsetMs).toISOString());
    }
  });

  let manual: { device: string; offsetMs: number };

  it('takes a warden marking one safe by hand, and the two rescuers bring out', async () => {
    const [found, ...rescued] = [...sim.stayers].sort((a, b) => a.floor - b.floor);
    const marked = await admin.post(`${base()}/${evacuationId}/roll/${encodeURIComponent(`user:${found!.user}`)}/safe`, {
      comment: 'Found in the plant room, walked out with a warden',
    });
    expect(marked.status, marked.text).toBe(200);
    expect(marked.body).toMatchObject({ status: 'safe_manual', marked_by: { email: ADMIN_EMAIL } });
    manual = { device: found!.device, offsetMs: Date.parse(marked.body.status_at) - t0 };
    // One after the other, so the second is last alone whatever the seed; at a run, to stay within the 5 minutes
    // ahead an upload accepts (the last fix is 3 min 46 s after the declaration at worst over seeds 1 to 300).
    const latest = () => Math.max(...[...sim.arrivals.values()].map((arrival) => arrival.offsetMs));
    for (const person of rescued)
      for (const poses of sim.rescue([person.device], latest() + 2000, 4)) await upload(poses, (pose) => t0 + pose.offsetMs);
    expect(latest()).toBeLessThan(4 * 60_000);
    const current = await rollUntil((counts) => counts.missing === 0);
    expect(current.counts).toMatchObject({ on_roll: 200, missing: 0, safe: 199, safe_manual: 1 });
    const ended = await admin.post(`${base()}/${evacuationId}/end`);
    expect(ended.status, ended.text).toBe(200);
  });

  it('reports the times to 50%, 90% and 100% accounted, the arrivals per point, the hand-marked and the last, as simulated', async () => {
    const expected = sim.figures([manual]);
    const response = await admin.get(`${base()}/${evacuationId}/report.json`);
    expect(response.status, response.text).toBe(200);
    const report = evacuationReportSchema.parse(response.body);
    expect(report.evacuation).toMatchObject({ id: evacuationId, drill: true, active: false, note: 'Simulated drill' });
    expect(report.counts).toEqual({
      on_roll: 200,
      accounted: 200,
      safe: 199,
      safe_manual: 1,
      left_site: 0,
      missing: 0,
      not_found: 0,
      arrivals: 0,
    });
    expect(report.milestones.map((milestone) => [milestone.percent, milestone.accounted, milestone.after_s])).toEqual([
      [50, 100, expected.milestones[50]],
      [90, 180, expected.milestones[90]],
      [100, 200, expected.milestones[100]],
    ]);
    expect(expected.milestones[100]).not.toBeNull();
    expect(
      Object.fromEntries(
        report.assembly_points.map((point) => [
          point.name,
          { arrivals: point.arrivals, firstS: point.first_after_s, lastS: point.last_after_s },
        ]),
      ),
    ).toEqual(expected.perPoint);
    expect(report.marked_by_hand).toEqual([
      expect.objectContaining({
        entry: `user:${userOf.get(manual.device)}`,
        after_s: manual.offsetMs / 1000,
        marked_by: expect.objectContaining({ email: ADMIN_EMAIL }),
        comment: 'Found in the plant room, walked out with a warden',
      }),
    ]);
    expect(expected.last).not.toBeNull();
    expect(report.last_accounted).toMatchObject({
      entry: `user:${userOf.get(expected.last!)}`,
      after_s: expected.milestones[100],
      accounted: 200,
    });
    expect(report.not_accounted).toEqual([]);
    // The timeline: the declaration, each of the 200 in the order they were accounted, the end.
    expect(report.timeline).toHaveLength(202);
    expect(report.timeline.map((row) => row.accounted)).toEqual([0, ...Array.from({ length: 200 }, (_, i) => i + 1), 200]);
    expect(report.timeline.filter((row) => row.milestone_pct !== null).map((row) => [row.milestone_pct, row.after_s])).toEqual([
      [50, expected.milestones[50]],
      [90, expected.milestones[90]],
      [100, expected.milestones[100]],
    ]);
  });

  it('writes the same timeline as CSV, and answers 404 for an evacuation that is not there', async () => {
    const json = (await admin.get(`${base()}/${evacuationId}/report.json`)).body;
    const csv = await admin.get(`${base()}/${evacuationId}/report.csv`);
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toContain('text/csv');
    const lines = csv.text.trimEnd().split('\r\n');
    expect(lines[0]).toBe(
      'at,after_s,event,entry,user_id,device_ids,assembly_point_id,assembly_point_name,marked_by,comment,accounted,accounted_pct,milestone_pct',
    );
    expect(lines.slice(1).map((line) => line.split(',').slice(0, 4).join(','))).toEqual(
      json.timeline.map((row: { at: string; after_s: number; event: string; entry: string | null }) =>
        [row.at, row.after_s, row.event, row.entry ?? ''].join(','),
      ),
    );
    expect((await admin.get(`${base()}/current/report.json`)).status).toBe(404);
    expect((await admin.get(`${base()}/00000000-0000-4000-8000-000000000000/report.csv`)).status).toBe(404);
  });

  it('pages nobody: a drill stores no webhook delivery, for its start, its 200 people or its end', async () => {
    // Deliveries are stored in the transaction of the change they announce: none stored is none to come.
    const deliveries = await admin.get(`/api/v1/webhooks/${webhookId}/deliveries`);
    expect(deliveries.status, deliveries.text).toBe(200);
    expect(deliveries.body.data).toEqual([]);
    expect(receiver.delivered('/pager')).toEqual([]);
  });
});
