import type { RollStatus } from '../../shared/evacuations/roll-counts.js';
import { pointInPolygon, type Point } from '../../shared/geo/geometry.js';

/**
 * The roll of an evacuation, as pure functions over plain data (no I/O, no clock): who is on it at declaration,
 * whether a fix stands in an assembly point, and how the missing are ordered for rescuers (it is counted by
 * shared/evacuations/roll-counts.ts).
 */

/** A stored position, as far as the roll needs it. `at` is the fix time (epoch ms). */
export interface Fix {
  deviceId: string;
  userId: string | null;
  buildingId: number | null;
  floorId: number | null;
  x: number | null;
  y: number | null;
  lat: number;
  lng: number;
  at: number;
}

/** An assembly point: a POLYGON or CIRCLE geofence with `muster_point`, in its building's metres. */
export interface MusterPoint {
  id: string;
  name: string;
  floorId: number;
  type: 'POLYGON' | 'CIRCLE';
  cartesians: Point[];
  radius: number | null;
}

export interface RollEntry {
  /** `user:{id}` for a person, `device:{identifier}` for a device nobody is assigned. */
  personKey: string;
  userId: string | null;
  deviceIds: string[];
  /** Came into the building after the declaration (a responder): listed apart, never counted as missing. */
  arrival: boolean;
  status: RollStatus;
  statusAt: number;
  pointId: string | null;
  pointName: string | null;
  /** The newest fix of any of the person's devices. */
  fix: Fix | null;
}

export const personKeyOf = (fix: Pick<Fix, 'userId' | 'deviceId'>): string =>
  fix.userId ? `user:${fix.userId}` : `device:${fix.deviceId}`;

/** The assembly point a fix stands in, if any. A fix without a floor (outdoors) counts on any floor's point. */
export function musterPointAt(points: readonly MusterPoint[], fix: Fix, toCartesian: (fix: Fix) => Point | null): MusterPoint | undefined {
  const local = fix.x !== null && fix.y !== null ? ([fix.x, fix.y] as Point) : toCartesian(fix);
  if (!local) return undefined;
  return points.find((point) => {
    if (fix.floorId !== null && fix.floorId !== point.floorId) return false;
    if (point.type === 'CIRCLE') {
      const [cx, cy] = point.cartesians[0]!;
      return Math.hypot(local[0] - cx, local[1] - cy) <= (point.radius ?? 0);
    }
    return pointInPolygon(local, point.cartesians);
  });
}

export interface Presence {
  buildingId: number;
  /** Each device's newest fix in the building within the presence window. */
  recentInside: ReadonlyMap<string, Fix>;
  /** Each device's newest fix anywhere (within the look-back): "whose last fix was inside" reads it. */
  latest: ReadonlyMap<string, Fix>;
  /** The declared scope: only people whose place in the building is on one of these floors (none: every floor). */
  floorIds: ReadonlySet<number> | null;
  points: readonly MusterPoint[];
  toCartesian: (fix: Fix) => Point | null;
  now: number;
}

/**
 * Everyone present at declaration, by person: devices with a fix in the building within the window, and devices
 * whose newest fix is in the building however old. Each person's status comes from their newest fix: in an
 * assembly point already, safe; outside the building (and not in a point), left_site; otherwise missing.
 */
export function rollAtDeclaration(presence: Presence): RollEntry[] {
  const { buildingId, recentInside, latest, floorIds } = presence;
  const people = new Map<string, RollEntry>();
  const devices = new Set([
    ...recentInside.keys(),
    ...[...latest.values()].filter((fix) => fix.buildingId === buildingId).map((fix) => fix.deviceId),
  ]);
  for (const deviceId of devices) {
    const newest = latest.get(deviceId) ?? recentInside.get(deviceId)!;
    const inside = newest.buildingId === buildingId ? newest : recentInside.get(deviceId)!;
    if (floorIds && (inside.floorId === null || !floorIds.has(inside.floorId))) continue;
    const key = personKeyOf(newest);
    const entry = people.get(key);
    if (!entry) {
      people.set(key, {
        personKey: key,
        userId: newest.userId,
        deviceIds: [deviceId],
        arrival: false,
        status: 'missing',
        statusAt: presence.now,
        pointId: null,
        pointName: null,
        fix: newest,
      });
    } else {
      entry.deviceIds.push(deviceId);
      if (entry.fix!.at < newest.at) entry.fix = newest;
    }
  }
  for (const entry of people.values()) {
    entry.deviceIds.sort();
    const point = musterPointAt(presence.points, entry.fix!, presence.toCartesian);
    if (point) Object.assign(entry, { status: 'safe', pointId: point.id, pointName: point.name });
    else if (entry.fix!.buildingId !== buildingId) entry.status = 'left_site';
  }
  return [...people.values()].sort((a, b) => (a.personKey < b.personKey ? -1 : 1));
}

/** What rescuers read first: the missing by floor (level, lowest first; no floor last), then by their fix, oldest first. */
export function orderMissing<T extends { fix: Fix | null }>(missing: readonly T[], levelOf: (floorId: number) => number | undefined): T[] {
  const level = (entry: T) => (entry.fix?.floorId != null ? (levelOf(entry.fix.floorId) ?? Infinity) : Infinity);
  return [...missing].sort((a, b) => level(a) - level(b) || (a.fix?.at ?? 0) - (b.fix?.at ?? 0));
}
