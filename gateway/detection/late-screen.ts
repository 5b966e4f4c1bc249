import type { PositionRecord } from '../../shared/positions/position-record.js';
import { pgArray } from '../../shared/storage/pg-array.js';
import type { Storage } from '../../shared/storage/index.js';
import type { BuildingDetection } from './building-detection.js';

/**
 * Which late fixes change nothing, told from their neighbours in storage instead of by a replay (the late path's
 * cost: its state rebuilt from storage, minutes of fixes run again). A late fix on the same floor as the stored fixes
 * just before and just after it, inside the same zones as both, changes no enter or exit: every zone's runs of
 * fixes inside and outside keep their first and last fix, so each enter and exit keeps its time, and a dwell or
 * grace ends as it did (it depends on those times only). It changes no max stay either unless it would be the
 * first fix over one: a stay that began (a fix inside a zone after one outside it) within the fence's limit before
 * the fix before it and before the late fix itself; those, and every other fix, take the replay.
 *
 * A neighbour may be a fix stored but not detected yet: it reaches the late path in its turn (it is older than the
 * newest detected one), and is screened against this one then. So any two neighbouring fixes whose zones differ
 * are replayed when the second of them is detected, wherever they came from.
 */
export interface LateScreenDependencies {
  storage: Storage;
  /** The building's zones and rules, as the detectors use them. */
  detectionOf(organizationId: string, buildingId: number): Promise<BuildingDetection | undefined>;
}

interface NeighbourRow {
  i: number;
  side: 'before' | 'after' | 'same';
  building_id: number | null;
  floor_id: number | null;
  x: number | null;
  y: number | null;
  ts_ms: number;
}

interface StayStartRow {
  i: number;
  building_id: number | null;
  floor_id: number | null;
  x: number | null;
  y: number | null;
  ts_ms: number;
}

/** Epoch milliseconds of a timestamptz, exactly (as late-detection.ts reads them). */
const ms = (column: string) => `round(extract(epoch from ${column}) * 1000)::float8`;

/** The zone ids at a stored or uploaded place, as a sorted key ('' outside every zone); undefined off any floor. */
function zonesKey(
  detection: BuildingDetection,
  place: { floorId: number | null; x: number | null; y: number | null },
): string[] | undefined {
  if (place.floorId === null || place.x === null || place.y === null) return undefined;
  return detection.index
    .zonesAt(place.floorId, place.x, place.y)
    .map((zone) => zone.id)
    .sort();
}

const sameZones = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((id, index) => id === b[index]);

/**
 * The devices (`organizationId|deviceId`) all of whose late fixes here change nothing (see above): one query for the
 * neighbours of every fix, one more for the stay starts of those inside a fence with a max stay.
 */
export async function unchangedDevices(
  deps: LateScreenDependencies,
  byDevice: ReadonlyMap<string, readonly PositionRecord[]>,
): Promise<Set<string>> {
  const fixes: { key: string; fix: PositionRecord; detection: BuildingDetection; zones: string[] }[] = [];
  const doubtful = new Set<string>();
  for (const [key, list] of byDevice) {
    for (const fix of list) {
      const detection = fix.buildingId === null ? undefined : await deps.detectionOf(fix.organizationId, fix.buildingId);
      const zones = detection && zonesKey(detection, fix);
      if (!detection || !zones) doubtful.add(key);
      else fixes.push({ key, fix, detection, zones });
    }
  }
  const candidates = fixes.filter(({ key }) => !doubtful.has(key));
  if (candidates.length === 0) return new Set();
  const rows = await deps.storage.execute<NeighbourRow>(
    `select l.i, n.side, n.building_id, n.floor_id, n.x, n.y, n.ts_ms
     from unnest(?::int[], ?::uuid[], ?::text[], ?::float8[]) as l(i, organization_id, device_id, ts_ms)
     cross join lateral (
       (select 'before' as side, building_id, floor_id, x, y, ${ms('ts')} as ts_ms from positions
        where organization_id = l.organization_id and device_id = l.device_id and ts < to_timestamp(l.ts_ms / 1000)
        order by ts desc, received_at desc limit 1)
       union all
       (select 'after', building_id, floor_id, x, y, ${ms('ts')} from positions
        where organization_id = l.organization_id and device_id = l.device_id and ts > to_timestamp(l.ts_ms / 1000)
        order by ts, received_at limit 1)
       union all
       (select 'same', building_id, floor_id, x, y, ${ms('ts')} from positions
        where organization_id = l.organization_id and device_id = l.device_id and ts = to_timestamp(l.ts_ms / 1000)
        offset 1 limit 1)
     ) n`,
    [
      pgArray(candidates.map((_, index) => index)),
      pgArray(candidates.map(({ fix }) => fix.organizationId)),
      pgArray(candidates.map(({ fix }) => fix.deviceId)),
      pgArray(candidates.map(({ fix }) => fix.timestamp)),
    ],
  );
  const neighbours = candidates.map(() => ({}) as Partial<Record<NeighbourRow['side'], NeighbourRow>>);
  for (const row of rows) neighbours[Number(row.i)]![row.side] = row;
  /** Fixes inside a fence with a max stay: the window a stay start would have to lie in, and those fences. */
  const stayChecks: { index: number; from: number; to: number; fences: Set<string> }[] = [];
  for (const [index, { key, fix, detection, zones }] of candidates.entries()) {
    const { before, after, same } = neighbours[index]!;
    // Another fix at the same time (a buffer sent twice): their order is by arrival, left to the replay.
    if (same || !before || !after) {
      doubtful.add(key);
      continue;
    }
    const besides = [before, after].every((row) => {
      if (row.building_id === null || Number(row.building_id) !== fix.buildingId || row.floor_id === null) return false;
      if (Number(row.floor_id) !== fix.floorId) return false;
      const theirs = zonesKey(detection, { floorId: Number(row.floor_id), x: row.x, y: row.y });
      return theirs !== undefined && sameZones(theirs, zones);
    });
    if (!besides) {
      doubtful.add(key);
      continue;
    }
    const limits = zones.map((zoneId) => detection.maxStayRules.get(zoneId)).filter((limit): limit is number => limit != null && limit > 0);
    if (limits.length === 0) continue;
    // The stay goes over at this fix instead of the one after it if it began in [before - limit, fix - limit].
    const fences = new Set(zones.filter((zoneId) => (detection.maxStayRules.get(zoneId) ?? 0) > 0));
    stayChecks.push({
      index,
      from: Number(before.ts_ms) - Math.max(...limits) * 1000,
      to: fix.timestamp - Math.min(...limits) * 1000,
      fences,
    });
  }
  const checked = stayChecks.filter(({ index }) => !doubtful.has(candidates[index]!.key));
  if (checked.length > 0) {
    // Each stored fix of that window with the one before it: a fence entered there (inside after outside) is a
    // stay that may start there.
    const starts = await deps.storage.execute<StayStartRow>(
      `select l.i, p.building_id, p.floor_id, p.x, p.y, p.ts_ms
       from unnest(?::int[], ?::uuid[], ?::text[], ?::float8[], ?::float8[]) as l(i, organization_id, device_id, from_ms, to_ms)
       cross join lateral (
         (select building_id, floor_id, x, y, ${ms('ts')} as ts_ms, received_at from positions
          where organization_id = l.organization_id and device_id = l.device_id and ts < to_timestamp(l.from_ms / 1000)
          order by ts desc, received_at desc limit 1)
         union all
         (select building_id, floor_id, x, y, ${ms('ts')}, received_at from positions
          where organization_id = l.organization_id and device_id = l.device_id
            and ts >= to_timestamp(l.from_ms / 1000) and ts <= to_timestamp(l.to_ms / 1000))
       ) p
       order by l.i, p.ts_ms, p.received_at`,
      [
        pgArray(checked.map(({ index }) => index)),
        pgArray(checked.map(({ index }) => candidates[index]!.fix.organizationId)),
        pgArray(checked.map(({ index }) => candidates[index]!.fix.deviceId)),
        pgArray(checked.map(({ from }) => from)),
        pgArray(checked.map(({ to }) => to)),
      ],
    );
    const byFix = new Map<number, StayStartRow[]>();
    for (const row of starts) (byFix.get(Number(row.i)) ?? byFix.set(Number(row.i), []).get(Number(row.i))!).push(row);
    for (const { index, from, fences } of checked) {
      const { key, fix, detection } = candidates[index]!;
      let inside = new Set<string>();
      let first = true;
      for (const row of byFix.get(index) ?? []) {
        const here =
          row.building_id !== null && Number(row.building_id) === fix.buildingId && row.floor_id !== null
            ? (zonesKey(detection, { floorId: Number(row.floor_id), x: row.x, y: row.y }) ?? [])
            : [];
        const now = new Set(here.filter((zoneId) => fences.has(zoneId)));
        // The window's first fix with nothing stored before it may itself be a stay's first.
        const inWindow = Number(row.ts_ms) >= from;
        if (inWindow && [...now].some((zoneId) => first || !inside.has(zoneId))) doubtful.add(key);
        inside = now;
        first = false;
      }
    }
  }
  const unchanged = new Set<string>();
  for (const { key } of candidates) if (!doubtful.has(key)) unchanged.add(key);
  return unchanged;
}
