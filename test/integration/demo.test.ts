import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DemoApi, type DemoApiError } from '../../demo/api-client.js';
import { seedDemoVenue, type SeededVenue } from '../../demo/seed.js';
import { Simulator } from '../../demo/simulator.js';
import { DEMO_BUILDING_NAME } from '../../demo/venue.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `npm run demo`'s parts against a test gateway: the venue seeded through the API, then the simulator for a few
 * seconds with everything accelerated (2 s max stay, 2 s of silence, DANGER after 1 s, 4 Hz).
 */
describe(`demo venue and simulator (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: DemoApi;
  let venue: SeededVenue;

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await DemoApi.signIn(running.baseUrl, ADMIN_EMAIL, ADMIN_PASSWORD);
    venue = await seedDemoVenue(admin, { maxStaySeconds: 2, deadmanSilenceSeconds: 2, responders: 2, people: 12 });
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('seeds two floors with a floorplan, max-stay geofences, an event, POIs, Responders and a graph that routes between floors', async () => {
    expect(venue.created).toBe(true);
    const building = await admin.get(`/api/v1/buildings/${venue.buildingId}`);
    expect(building.floors).toHaveLength(2);
    for (const floor of building.floors) {
      const image = await fetch(running.baseUrl + floor.maps.map_url, { headers: { 'x-api-key': venue.simulatorApiKey } });
      expect(image.status).toBe(200);
      expect(image.headers.get('content-type')).toBe('image/png');
    }
    expect(building.geofences.filter((g: any) => g.max_stay_time === 2)).toHaveLength(2);
    expect(building.events).toHaveLength(1);
    // Two assembly points outside the footprint on the ground floor, which the path graph reaches.
    const points = building.geofences.filter((g: any) => g.muster_point);
    expect(points.map((g: any) => [g.name, g.type, g.floor_id])).toEqual([
      ['West lawn', 'CIRCLE', venue.floorIds[0]],
      ['Car park', 'POLYGON', venue.floorIds[0]],
    ]);
    expect(building.indoor_pois.length).toBeGreaterThanOrEqual(5);
    // The defibrillator, first-aid kit, entrance and nurses station carry a category whose icon is served.
    const categories = await admin.get<any[]>('/api/v1/poi_categories');
    const categoryOf = (name: string) =>
      categories.find((c) => c.id === building.indoor_pois.find((p: any) => p.name === name)?.category_id);
    expect(['Defibrillator', 'First-aid kit', 'Main entrance', 'Nurses station'].map((name) => categoryOf(name)?.code)).toEqual([
      'aed',
      'first_aid',
      'main_entrance',
      'nurses_station',
    ]);
    const icon = await fetch(running.baseUrl + categoryOf('Defibrillator').icon_url, { headers: { 'x-api-key': venue.simulatorApiKey } });
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toBe('image/png');
    // People have names with a role, and the device of each is theirs: the console shows "Ana (nurse) · demo-01".
    const users = (await admin.get<any>('/api/v1/users?size=1000')).data as any[];
    const devices = await admin.get<any>('/api/v1/devices?size=1000');
    const owner = (identifier: string) =>
      users.find((u) => u.id === (devices.data ?? devices).find((d: any) => d.identifier === identifier)?.user_id)?.full_name;
    expect(owner('demo-01')).toBe('Ana (nurse)');
    expect(owner('demo-12')).toMatch(/^\p{L}+ \([a-z]+\)$/u);
    const settings = await admin.get(`/api/v1/buildings/${venue.buildingId}/alarm_settings`);
    expect(settings).toMatchObject({ deadman_silence_s: 2 });
    const groups = await admin.get<any>('/api/v1/groups?name=Responders');
    expect((Array.isArray(groups) ? groups : groups.data).map((g: any) => g.id)).toContain(venue.groupId);

    const [ground, first] = venue.floorIds;
    const route = (extra = '') =>
      admin.get(
        `/api/v1/buildings/${venue.buildingId}/route?from_floor_id=${ground}&from_x=15&from_y=40&to_floor_id=${first}&to_x=25&to_y=10${extra}`,
      );
    const stairs = await route();
    expect(stairs.legs.map((leg: any) => leg.floor_id)).toEqual([ground, first]);
    expect(stairs.steps.find((s: any) => s.floor_change).floor_change.via).toBe('stairs');
    const lift = await route('&accessible=true');
    expect(lift.steps.find((s: any) => s.floor_change).floor_change.via).toBe('lift');
  });

  it('walks devices that store positions, cross geofences and raise max-stay, DEADMAN and DANGER alarms', async () => {
    const started = new Date();
    const watcher = await TestSocket.open(running.baseUrl, { headers: { 'x-api-key': venue.simulatorApiKey } });
    const subscribed = await watcher.request({
      op: 'subscribe',
      topics: [`buildings/${venue.buildingId}/geofence-events`, 'organization/alarms'],
    });
    expect(subscribed.op).toBe('subscribed');

    const simulator = await Simulator.connect({
      url: running.baseUrl,
      apiKey: venue.simulatorApiKey,
      buildingId: venue.buildingId,
      devices: 12,
      intervalMs: 250,
      lingerers: 2,
      lingerSeconds: 60,
      silentAfterSeconds: 1,
      dangerAfterSeconds: 1,
    });
    simulator.start();
    try {
      await watcher.next((f) => f.op === 'geofence_event' && f.data.type === 'enter', 15_000);
      for (const type of ['DANGER', 'GEOFENCE_MAX_STAY_TIME', 'DEADMAN']) {
        await watcher.next((f) => f.op === 'alarm' && f.data.type === type && f.data.event === 'raised', 15_000);
      }
    } finally {
      await simulator.stop();
      watcher.ws.close();
    }
    expect(simulator.stats.failedUploads).toBe(0);
    expect(simulator.stats.posesSent).toBeGreaterThan(12);

    const alarms = await admin.get(`/api/v1/alarms?building_id=${venue.buildingId}&size=100`);
    const raised = (alarms.data ?? alarms) as any[];
    expect(raised.find((a) => a.type === 'DANGER')).toMatchObject({ device_id: 'demo-09', state: 'OPEN' });
    expect(raised.find((a) => a.type === 'DEADMAN')).toMatchObject({
      device_id: 'demo-10',
      details: expect.objectContaining({ reason: 'silence' }),
    });
    expect(raised.filter((a) => a.type === 'GEOFENCE_MAX_STAY_TIME').map((a) => a.device_id)).toEqual(
      expect.arrayContaining(['demo-11', 'demo-12']),
    );

    // Every acknowledged pose is stored (the raw_data report reads them back from PostgreSQL).
    const query = `from_date=${started.toISOString()}&to_date=${new Date(Date.now() + 60_000).toISOString()}&building_ids=${venue.buildingId}&limit=100000`;
    const stored = await admin.get(`/api/v1/reports/raw_data.json?${query}`);
    expect(stored.data).toHaveLength(simulator.stats.posesSent);
    for (const row of stored.data) expect(venue.floorIds).toContain(row.floor_id);
  });

  it('runs a drill: the simulated people walk to the assembly points, those who stay behind are the missing, and all walk back in', async () => {
    const simulator = await Simulator.connect({
      url: running.baseUrl,
      apiKey: venue.simulatorApiKey,
      buildingId: venue.buildingId,
      devices: 12,
      intervalMs: 250,
      speedMps: 10,
      lingerers: 2,
      lingerSeconds: 60,
      silentAfterSeconds: 1,
      dangerAfterSeconds: 60,
      stayBehind: 2,
      reactionSeconds: 1,
      evacuationPollMs: 500,
    });
    const base = `/api/v1/buildings/${venue.buildingId}/evacuations`;
    simulator.start();
    try {
      await sleep(1500); // everyone seen in the building
      const drill = await admin.post(base, { drill: true, note: 'demo test' });
      expect(drill.counts.on_roll).toBe(12);
      // The silent device (demo-10) and the two who stay behind (demo-07, demo-08) stay missing; everyone else reaches a point.
      let roll = await admin.get(`${base}/current`);
      for (let waited = 0; roll.counts.safe < 9 && waited < 45_000; waited += 500) {
        await sleep(500);
        roll = await admin.get(`${base}/current`);
      }
      expect(roll.counts).toMatchObject({ on_roll: 12, safe: 9, missing: 3 });
      expect(roll.missing.flatMap((entry: any) => entry.device_ids).sort()).toEqual(['demo-07', 'demo-08', 'demo-10']);
      const reached = new Set(roll.roll.filter((entry: any) => entry.status === 'safe').map((entry: any) => entry.assembly_point.name));
      expect([...reached].every((name) => name === 'West lawn' || name === 'Car park')).toBe(true);

      await admin.post(`${base}/${drill.id}/end`);
      // Back inside the footprint (80 x 50 m) once the simulator has seen the end.
      const inside = async () => {
        const live = await admin.get(`/api/v1/real_time/building/${venue.buildingId}`);
        return (live.features as any[]).every((feature) => {
          const [x, y] = feature.properties.local_coordinates as [number, number];
          return x >= 0 && x <= 80 && y >= 0 && y <= 50;
        });
      };
      let back = await inside();
      for (let waited = 0; !back && waited < 20_000; waited += 500) {
        await sleep(500);
        back = await inside();
      }
      expect(back).toBe(true);
    } finally {
      await simulator.stop();
    }
    expect(simulator.stats.failedUploads).toBe(0);
  });

  it('reuses the seeded venue on a second start and replaces the simulator key', async () => {
    const again = await seedDemoVenue(admin, { maxStaySeconds: 2, deadmanSilenceSeconds: 2, responders: 2, people: 12 });
    expect(again).toMatchObject({ created: false, buildingId: venue.buildingId, floorIds: venue.floorIds, groupId: venue.groupId });
    expect((await admin.get<any[]>('/api/v1/buildings')).filter((b) => b.name === DEMO_BUILDING_NAME)).toHaveLength(1);
    const building = await admin.get(`/api/v1/buildings/${venue.buildingId}`);
    expect(building.geofences.filter((g: any) => g.muster_point)).toHaveLength(2); // found, not made again
    const old = new DemoApi(running.baseUrl, { apiKey: venue.simulatorApiKey });
    await expect(old.get('/api/v1/buildings')).rejects.toMatchObject({ status: 401 } satisfies Partial<DemoApiError>);
    expect(await new DemoApi(running.baseUrl, { apiKey: again.simulatorApiKey }).get('/api/v1/buildings')).toHaveLength(1);
  });
});
