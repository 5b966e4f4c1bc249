import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PositionStore } from '../../shared/positions/position-store.js';
import { shapesOf, type FenceRow } from '../../shared/reports/fence-grid.js';
import { rollupMaterialization, RUN_GAP_US } from '../../shared/reports/rollups.js';
import { inBoundedTransaction, sqlOf, UNBOUNDED } from '../../shared/reports/report-sql.js';
import { geofenceStays, STAYS_THRESHOLD_S } from '../../shared/reports/stays.js';
import type { Storage } from '../../shared/storage/storage.js';
import { pgArray } from '../../shared/storage/pg-array.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import { adminClient } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const HOUR = Date.UTC(2026, 2, 10, 10, 0, 0);
const USERS = [null, '00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002'];

/**
 * The materializer's stays and rollup runs are split into runs in this process (shared/reports/time-runs.ts) from
 * what PostgreSQL groups. Here they are checked against their definition in plain SQL: every position joined to
 * every geofence with PostgreSQL's own operators (no grid), runs by `lag` over time, as the window statements the
 * rebuilds replaced computed them. Random device-hours: times to the µs with gaps at the thresholds, ties, users,
 * buildings and floors that change, positions on and around the edges of overlapping shapes of every kind.
 */
describe(`materializer rebuilds equal their plain SQL definition (${driverLabel})`, () => {
  let running: RunningGateway;
  let storage: Storage;
  let organizationId: string;
  let buildingId: number;
  let floorIds: number[];

  beforeAll(async () => {
    running = await startTestGateway({ POSITIONS_MAX_AGE_SECONDS: String(100 * 365 * 86_400), REPORTS_MATERIALIZE_INTERVAL_MS: '0' });
    const admin = await adminClient(running.client);
    storage = running.gateway.services.storage;
    const venue = await createVenue(admin, 'Exactness venue');
    buildingId = venue.building.id;
    floorIds = venue.floors.map((floor: { id: number }) => floor.id);
    const fences = [
      { type: 'POLYGON', cartesians: squareCartesians(10, 10, 10) },
      {
        type: 'POLYGON',
        cartesians: [
          [12, 8],
          [26, 14],
          [14, 24],
          [12, 8],
        ],
      },
      { type: 'CIRCLE', cartesians: [[20, 15]], radius: 4 },
      { type: 'POINT', cartesians: [[15, 18]], radius: 2 },
      {
        type: 'LINE',
        cartesians: [
          [5, 15],
          [30, 17],
          [35, 10],
        ],
        radius: 1.5,
      },
    ];
    for (const [i, body] of fences.entries()) {
      const response = await admin.post('/api/v1/geofences', { name: `F${i}`, building_id: buildingId, floor_id: floorIds[0], ...body });
      expect(response.status, response.text).toBe(201);
    }
    organizationId = (
      await storage.execute<{ organization_id: string }>('select organization_id::text from buildings where id = ?', [buildingId])
    )[0]!.organization_id;
    await new PositionStore(storage).ensurePartitions([{ timestamp: HOUR } as never, { timestamp: HOUR + 3_599_999 } as never]);
  });
  afterAll(async () => running?.stop());

  /** Stay segments by definition: positions x geofences, runs per device-hour, fence, user and building. */
  async function definedStays(): Promise<unknown[]> {
    const fences = await storage.execute<FenceRow>(
      'select id, name, floor_id, type, cartesians, radius, geometry_version, geometry_since from geofences where organization_id = ?',
      [organizationId],
    );
    const { shapes } = shapesOf(fences);
    const of = (pick: (shape: (typeof shapes)[number]) => string | number | null) => pgArray(shapes.map(pick));
    return storage.execute(
      `with f as (
         select * from unnest(?::uuid[], ?::int[], ?::int[], ?::text[], ?::polygon[], ?::float8[], ?::float8[], ?::float8[], ?::path[]) as f(fence_id, version, floor_id, kind, polygon, x, y, radius, path)
       ), h as (
         select p.device_id, date_bin('1 hour', p.ts, '2000-01-01T00:00:00Z') as hour, f.fence_id, f.version, p.user_id, p.building_id, p.ts
         from positions p join f on f.floor_id = p.floor_id
         where p.organization_id = ? and case f.kind when 'polygon' then f.polygon @> point(p.x, p.y) when 'disc' then point(f.x, f.y) <-> point(p.x, p.y) <= f.radius else point(p.x, p.y) <-> f.path <= f.radius end
       ), m as (
         select h.*, case when ts - lag(ts) over (partition by device_id, hour, fence_id, user_id, building_id order by ts) <= make_interval(secs => ?) then 0 else 1 end as starts from h
       ), r as (
         select m.*, sum(starts) over (partition by device_id, hour, fence_id, user_id, building_id order by ts rows unbounded preceding) as run from m
       )
       select device_id, hour::text, fence_id::text, version, user_id::text, building_id, min(ts)::text as first_ts, max(ts)::text as last_ts, count(*)::int as positions
       from r group by device_id, hour, fence_id, version, user_id, building_id, run order by 1, 2, 3, 5, 6, 7`,
      [
        of((s) => s.fenceId),
        of((s) => s.version),
        of((s) => s.floorId),
        of((s) => s.kind),
        of((s) => (s.kind === 'polygon' ? s.literal : null)),
        of((s) => (s.kind === 'disc' ? s.points[0]![0] : null)),
        of((s) => (s.kind === 'disc' ? s.points[0]![1] : null)),
        of((s) => s.radius),
        of((s) => (s.kind === 'path' ? s.literal : null)),
        organizationId,
        STAYS_THRESHOLD_S,
      ],
    );
  }

  const keptStays = () =>
    storage.execute(
      `select device_id, hour::text, fence_id::text, geometry_version as version, user_id::text, building_id, first_ts::text, last_ts::text, positions from geofence_stays where organization_id = ? order by 1, 2, 3, 5, 6, 7`,
      [organizationId],
    );

  /** Rollup runs by definition: `lag` over time per device, quarter hour, building, floor and user. */
  const definedRuns = () =>
    storage.execute(
      `select device_id, quarter::text, building_id, floor_id, user_id::text, min(us) as first_us, max(us) as last_us, count(*)::int as positions
       from (
         select *, sum(starts) over (partition by device_id, quarter, building_id, floor_id, user_id order by us rows unbounded preceding) as run
         from (
           select *, case when us - lag(us) over (partition by device_id, quarter, building_id, floor_id, user_id order by us) <= ${RUN_GAP_US} then 0 else 1 end as starts
           from (
             select p.device_id, date_bin('15 minutes', p.ts, '2000-01-01T00:00:00Z') as quarter, p.building_id, p.floor_id, p.user_id, (extract(epoch from p.ts) * 1000000)::int8 as us
             from positions p where p.organization_id = ? and p.building_id is not null
           ) s
         ) g
       ) r group by device_id, quarter, building_id, floor_id, user_id, run order by 1, 2, 3, 4, 5, 6`,
      [organizationId],
    );
  const keptRuns = () =>
    storage.execute(
      `select device_id, quarter::text, building_id, floor_id, user_id::text, first_us, last_us, positions from rollup_runs where organization_id = ? order by 1, 2, 3, 4, 5, 6`,
      [organizationId],
    );

  // Each position comes a gap after its device's previous one: gaps equal to a
  // threshold and one µs over it, ties, anything up to 40 s; a few jump across a quarter hour.
  const gap = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(0, 1, 5_000_000, 5_000_001, 15_000_000, 15_000_001) },
    { weight: 3, arbitrary: fc.integer({ min: 0, max: 40_000_000 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 900_000_000 }) },
  );
  const position = fc.record({
    device: fc.constantFrom('a', 'a', 'b'),
    gap,
    // Mostly the same user, building and floor, so that gaps at the thresholds fall inside one key.
    user: fc.oneof({ weight: 8, arbitrary: fc.constant(USERS[0]) }, { weight: 1, arbitrary: fc.constantFrom(USERS[1], USERS[2]) }),
    building: fc.oneof({ weight: 12, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
    floor: fc.oneof({ weight: 12, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.constantFrom(1, null) }),
    // Mostly inside the overlapping shapes (10..26 x 8..24), also around them, and on some of their edges and corners.
    x: fc.oneof(
      fc.double({ min: 10, max: 26, noNaN: true }),
      fc.double({ min: 3, max: 37, noNaN: true }),
      fc.constantFrom(10, 20, 12, 26, 24, 30, 15),
    ),
    y: fc.oneof(
      fc.double({ min: 8, max: 24, noNaN: true }),
      fc.double({ min: 3, max: 27, noNaN: true }),
      fc.constantFrom(10, 20, 8, 14, 11, 15, 17),
    ),
  });

  it('stays and rollup runs of random device-hours, rebuilt in one transaction', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(position, { minLength: 30, maxLength: 150 }), async (positions) => {
        await storage.execute('delete from positions where organization_id = ?', [organizationId]);
        const last = new Map<string, number>();
        const times = positions.map((p) => {
          const us = Math.min((last.get(p.device) ?? 0) + p.gap, 3_599_999_999);
          last.set(p.device, us);
          return us;
        });
        const column = <T>(pick: (p: (typeof positions)[number]) => T) => pgArray(positions.map(pick) as never);
        await storage.execute(
          `insert into positions (organization_id, device_id, user_id, building_id, floor_id, indoor, x, y, lat, lng, ts)
           select ?::uuid, p.device_id, p.user_id, p.building_id, p.floor_id, true, p.x, p.y, 40.4, -3.7, ?::timestamptz + p.us * interval '1 microsecond'
           from unnest(?::text[], ?::int8[], ?::uuid[], ?::int[], ?::int[], ?::float8[], ?::float8[]) as p(device_id, us, user_id, building_id, floor_id, x, y)`,
          [
            organizationId,
            new Date(HOUR).toISOString(),
            column((p) => p.device),
            pgArray(times),
            column((p) => p.user),
            column((p) => (p.building ? buildingId : null)),
            column((p) => (p.floor === null ? null : floorIds[p.floor])),
            column((p) => p.x),
            column((p) => p.y),
          ],
        );
        const units = ['a', 'b'].map((deviceId) => ({ organizationId, deviceId, hour: new Date(HOUR) }));
        await inBoundedTransaction(storage, UNBOUNDED, async (execute) => {
          await geofenceStays.rebuild(execute, units);
          await rollupMaterialization.rebuild(execute, units);
          await execute(sqlOf('select 1'));
        });
        expect(await keptStays()).toEqual(await definedStays());
        expect(await keptRuns()).toEqual(await definedRuns());
      }),
      { numRuns: 40 },
    );
  });
});
