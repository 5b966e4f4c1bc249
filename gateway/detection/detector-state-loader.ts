import type { Logger } from '../../shared/logger.js';
import * as deadman from '../../shared/detection/deadman.detector.js';
import type { ZoneKind } from '../../shared/detection/zone-index.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { pgArray } from '../../shared/storage/pg-array.js';
import type { Storage } from '../../shared/storage/index.js';
import type { BuildingRegistry } from '../realtime/building-registry.js';
import type { DetectionEngine } from './detection-engine.js';
import type { StoredStay } from './detector.js';
import { epochMs } from '../../shared/storage/epoch-ms.js';

export interface DetectorStateLoaderOptions {
  /** The engine's forget window: a device whose latest position arrived longer ago than this holds no state. */
  lookbackMs: number;
  /** POSITIONS_MAX_AGE_SECONDS in ms: a fix arriving within the lookback may have been taken this much earlier. */
  maxAgeMs?: number;
  /** How far back stored enters are looked for: a stay begun earlier is not restored (its device would enter again). */
  openStaysLookbackMs?: number;
  /**
   * Latest positions replayed per device for the dead-man state (see `deadman.restoredState`), in a building
   * where stillness or a minimum presence is configured; elsewhere the latest position says all there is.
   */
  trailLength?: number;
}

const DEFAULT_TRAIL_LENGTH = 30;

interface LatestRow {
  device_id: string;
  user_id: string | null;
  building_id: number;
  floor_id: number | null;
  indoor: boolean;
  x: number | null;
  y: number | null;
  lat: number;
  lng: number;
  yaw: number;
  accuracy: number | null;
  ts_ms: number;
  received_ms: number;
}

interface TrailRow {
  device_id: string;
  building_id: number | null;
  floor_id: number | null;
  x: number | null;
  y: number | null;
  ts_ms: number;
  received_ms: number;
}

interface StayRow {
  device_id: string;
  building_id: number;
  zone_kind: ZoneKind;
  zone_id: string;
  type: 'enter' | 'exit';
  at_ms: number;
  settled_ms: number;
}

/**
 * Rebuilds detector state from what is stored, for a building this gateway takes over (or every building at
 * start): each device whose latest stored position is in the building and arrived within the engine's forget
 * window gets, through each detector's `restore` (gateway/detection/detector.ts; the pure `restoredState`s do the work),
 * - zones: inside each zone whose latest stored zone event is an `enter`, since that enter's `at`;
 * - stays: those geofence stays, fired when their alarm's idempotency key is stored;
 * - dead-man: the device's latest positions replayed (silence runs from the latest one's arrival, stillness from
 *   where the trail last moved, or from an alarmed stillness older than the trail).
 * - a silence alarm still OPEN for the latest position counts as raised: the device's next position restores contact;
 *   so does a member of a silence storm whose building alarm is not closed yet (the storm holds its DEADMAN again).
 * Detection of the buildings then resumes (`engine.resume`): the time between the latest positions and now was
 * nobody's watch, so silence is judged from now and stays do not count it (a device back within its window
 * raises nothing; one still silent a window from now raises its alarm, dated from its last fix).
 * The idempotency keys hold the same times the previous owner used (milliseconds survive timestamptz exactly), so
 * a condition it already raised is a no-op when the next sweep raises it again, and one the outage delayed is
 * raised once. A handful of set-based queries per organization, whatever the number of devices.
 */
export class DetectorStateLoader {
  constructor(
    private readonly storage: Storage,
    private readonly engine: DetectionEngine,
    private readonly registry: BuildingRegistry,
    private readonly logger: Logger,
    private readonly options: DetectorStateLoaderOptions,
  ) {}

  /** Fix time before which no stored position can still hold detector state (`now` less the lookback and the max age). */
  oldestRelevantFix(now: number): number {
    return now - this.options.lookbackMs - (this.options.maxAgeMs ?? 0);
  }

  /** Rebuilds buildings of one organization with one pass over its devices; replaces what the engine held for them. Returns the devices restored. */
  async rebuildBuildings(organizationId: string, buildingIds: readonly number[], now = Date.now()): Promise<number> {
    const runtimes = new Map<number, NonNullable<Awaited<ReturnType<BuildingRegistry['get']>>>>();
    for (const buildingId of buildingIds) {
      const runtime = await this.registry.get(organizationId, buildingId);
      if (runtime) runtimes.set(buildingId, runtime);
    }
    const latest = runtimes.size === 0 ? [] : await this.latestPositions(organizationId, [...runtimes.keys()], now);
    const deviceIds = latest.map((row) => row.device_id);
    const trailLength = this.options.trailLength ?? DEFAULT_TRAIL_LENGTH;
    // Stillness and presence need the way the device came; silence alone only needs its latest position.
    const trailed = latest
      .filter((row) => this.engine.buildings.of(runtimes.get(row.building_id))?.deadman.deadmanAfterS)
      .map((row) => row.device_id);
    const [trails, stays] =
      deviceIds.length === 0
        ? [new Map<string, TrailRow[]>(), [] as StayRow[]]
        : await Promise.all([
            this.trails(organizationId, trailed, trailLength, now),
            this.stays(organizationId, [...runtimes.keys()], deviceIds, now),
          ]);
    const latestBuilding = new Map(latest.map((row) => [row.device_id, row.building_id]));

    // Per device: open stays (by zone key) and what settled them.
    const inside = new Map<string, Map<string, StoredStay>>();
    const settledBefore = new Map<string, number>();
    for (const row of stays) {
      settledBefore.set(row.device_id, row.settled_ms);
      // An enter left open in another building (its exits lost with a crashed owner) is no stay now.
      if (row.type !== 'enter' || row.building_id !== latestBuilding.get(row.device_id)) continue;
      const zoneId = this.engine.buildings.keyOf(row.zone_kind, row.zone_id);
      const stay = { kind: row.zone_kind, enteredAt: row.at_ms, alarmed: false };
      inside.set(row.device_id, (inside.get(row.device_id) ?? new Map()).set(zoneId, stay));
    }
    // The dead-man replays, first without what was alarmed, to know which still alarm to look for.
    const settingsOf = (row: LatestRow) => this.engine.buildings.of(runtimes.get(row.building_id))?.deadman;
    const trailOf = (row: LatestRow): deadman.DeadmanTrailEntry[] =>
      (trails.get(row.device_id) ?? [row]).map((point) => ({
        at: point.received_ms,
        position:
          point.building_id === row.building_id && point.floor_id !== null && point.x !== null && point.y !== null
            ? { x: point.x, y: point.y, floorId: point.floor_id, buildingId: point.building_id }
            : null,
      }));
    const candidates: string[] = [];
    for (const row of latest) {
      const anchor = deadman.restoredState(trailOf(row), settingsOf(row))?.anchor.at;
      if (anchor !== undefined) candidates.push(`deadman|${row.device_id}|still|${anchor}`);
      for (const [zoneId, stay] of inside.get(row.device_id) ?? [])
        if (stay.kind === 'geofence') candidates.push(`max-stay|${row.device_id}|${zoneId}|${stay.enteredAt}`);
    }
    const raised = candidates.length === 0 ? new Set<string>() : await this.raisedKeys(organizationId, candidates);
    const openStill = deviceIds.length === 0 ? new Map<string, number>() : await this.openDeadmanAlarms(organizationId, deviceIds, 'still');
    const openSilence =
      deviceIds.length === 0 ? new Map<string, number>() : await this.openDeadmanAlarms(organizationId, deviceIds, 'silence');
    const storms = runtimes.size === 0 ? [] : await this.openStorms(organizationId, [...runtimes.keys()]);
    // A storm's members have their silence raised, held by the building alarm.
    for (const { details } of storms) {
      for (const member of Array.isArray(details.devices) ? details.devices : []) {
        const since = Date.parse(member?.since);
        if (typeof member?.device_id === 'string' && Number.isFinite(since) && !openSilence.has(member.device_id))
          openSilence.set(member.device_id, since);
      }
    }

    for (const buildingId of buildingIds) this.engine.forgetBuilding(buildingId);
    for (const row of latest) {
      const stays = inside.get(row.device_id) ?? new Map<string, StoredStay>();
      for (const [zoneId, stay] of stays) stay.alarmed = raised.has(`max-stay|${row.device_id}|${zoneId}|${stay.enteredAt}`);
      const trail = trailOf(row);
      const replayedAnchor = deadman.restoredState(trail, settingsOf(row))?.anchor.at;
      const stillAlarmedSince =
        replayedAnchor !== undefined && raised.has(`deadman|${row.device_id}|still|${replayedAnchor}`)
          ? replayedAnchor
          : openStill.get(row.device_id);
      this.engine.restore({
        last: recordOf(organizationId, row),
        detection: this.engine.buildings.of(runtimes.get(row.building_id)),
        stays,
        trail,
        deadman: { stillAlarmedSince, silenceAlarmedSince: openSilence.get(row.device_id), truncated: trail.length >= trailLength },
        settledBefore: settledBefore.get(row.device_id) ?? 0,
      });
    }
    for (const { building_id, details } of storms) this.engine.restoreBuilding(organizationId, building_id, { silentAlarm: details });
    // Nobody detected these buildings until now: a device quiet meanwhile is judged from now, not from its last fix.
    this.engine.resume(runtimes.keys(), now);
    this.logger.info({ organizationId, buildingIds, devices: latest.length }, 'detector state rebuilt from storage');
    return latest.length;
  }

  /**
   * The latest stored position of every device of the organization, when it is in one of these buildings and
   * arrived within the lookback. One index probe per device (newest first, the first row found), bounded to
   * the partitions an accepted fix arriving within the lookback can be in.
   */
  private latestPositions(organizationId: string, buildingIds: number[], now: number): Promise<LatestRow[]> {
    const { lookbackMs } = this.options;
    return this.storage.execute<LatestRow>(
      `select d.identifier as device_id, l.user_id, l.building_id, l.floor_id, l.indoor, l.x, l.y, l.lat, l.lng, l.yaw, l.accuracy, l.ts_ms, l.received_ms
       from devices d
       cross join lateral (
         select p.user_id, p.building_id, p.floor_id, p.indoor, p.x, p.y, p.lat, p.lng, p.yaw, p.accuracy, p.received_at,
                ${epochMs('p.ts')} as ts_ms, ${epochMs('p.received_at')} as received_ms
         from positions p
         where p.organization_id = d.organization_id and p.device_id = d.identifier and p.ts >= to_timestamp(?::float8 / 1000)
         order by p.ts desc, p.received_at desc
         limit 1
       ) l
       where d.organization_id = ? and l.building_id = any(?::int[]) and l.received_at >= to_timestamp(?::float8 / 1000)`,
      [this.oldestRelevantFix(now), organizationId, pgArray(buildingIds), now - lookbackMs],
    );
  }

  /**
   * These devices' latest positions, oldest first. The cost is one random heap read
   * per position (a device's fixes are spread among everyone's), hence trails only where they tell something.
   */
  private async trails(organizationId: string, deviceIds: string[], length: number, now: number): Promise<Map<string, TrailRow[]>> {
    if (deviceIds.length === 0) return new Map();
    const rows = await this.storage.execute<TrailRow>(
      `select d.device_id, t.building_id, t.floor_id, t.x, t.y, t.ts_ms, t.received_ms
       from unnest(?::text[]) as d(device_id)
       cross join lateral (
         select p.building_id, p.floor_id, p.x, p.y, ${epochMs('p.ts')} as ts_ms, ${epochMs('p.received_at')} as received_ms
         from positions p
         where p.organization_id = ? and p.device_id = d.device_id and p.ts >= to_timestamp(?::float8 / 1000)
         order by p.ts desc, p.received_at desc
         limit ?
       ) t`,
      [pgArray(deviceIds), organizationId, this.oldestRelevantFix(now), length],
    );
    const trails = new Map<string, TrailRow[]>();
    for (const row of rows) (trails.get(row.device_id) ?? trails.set(row.device_id, []).get(row.device_id)!).push(row);
    // Sorted here, a few positions per device, rather than all of them in one sort by the database.
    for (const trail of trails.values()) trail.sort((a, b) => a.ts_ms - b.ts_ms || a.received_ms - b.received_ms);
    return trails;
  }

  /**
   * The latest zone event per device and zone in these buildings, with the arrival of the device's newest stored
   * one (`settled_ms`: what the previous owner had finished). Events of one instant tie-break on insertion order.
   */
  private stays(organizationId: string, buildingIds: number[], deviceIds: string[], now: number): Promise<StayRow[]> {
    return this.storage.execute<StayRow>(
      `select distinct on (device_id, zone_kind, zone_id) device_id, building_id, zone_kind, zone_id, type, ${epochMs('at')} as at_ms,
              ${epochMs('max(at) over (partition by device_id)')} as settled_ms
       from zone_events
       where organization_id = ? and building_id = any(?::int[]) and at >= to_timestamp(?::float8 / 1000) and device_id = any(?::text[]) and not superseded
       order by device_id, zone_kind, zone_id, at desc, fired_at desc, ctid desc`,
      [organizationId, pgArray(buildingIds), now - (this.options.openStaysLookbackMs ?? 24 * 3600_000), pgArray(deviceIds)],
    );
  }

  private async raisedKeys(organizationId: string, keys: string[]): Promise<Set<string>> {
    const rows = await this.storage.execute<{ key: string }>(
      'select key from alarm_raise_keys where organization_id = ? and key = any(?::text[])',
      [organizationId, pgArray(keys)],
    );
    return new Set(rows.map((row) => row.key));
  }

  /** The building alarms of silence storms not yet closed (OPEN, CONFIRMED, OTHER), the newest per building. */
  private async openStorms(
    organizationId: string,
    buildingIds: number[],
  ): Promise<{ building_id: number; details: Record<string, unknown> }[]> {
    const rows = await this.storage.execute<{ building_id: number; details: Record<string, unknown> | string }>(
      `select distinct on (building_id) building_id, details from alarms
       where organization_id = ? and type = 'BUILDING_SILENT' and state not in ('CLOSED', 'MARKED_FALSE') and building_id = any(?::int[])
       order by building_id, created_at desc`,
      [organizationId, pgArray(buildingIds)],
    );
    return rows.map((row) => ({
      building_id: Number(row.building_id),
      details: typeof row.details === 'string' ? JSON.parse(row.details) : row.details,
    }));
  }

  /** `since` of the OPEN DEADMAN alarm of each device whose latest raise was for this reason. */
  private async openDeadmanAlarms(
    organizationId: string,
    deviceIds: string[],
    reason: deadman.DeadmanReason,
  ): Promise<Map<string, number>> {
    const rows = await this.storage.execute<{ device_id: string; since: string }>(
      `select device_id, details->>'since' as since from alarms
       where organization_id = ? and type = 'DEADMAN' and state = 'OPEN' and device_id = any(?::text[]) and details->>'reason' = ?`,
      [organizationId, pgArray(deviceIds), reason],
    );
    return new Map(
      rows.map((row) => [row.device_id, Date.parse(row.since)]).filter(([, since]) => Number.isFinite(since)) as [string, number][],
    );
  }
}

function recordOf(organizationId: string, row: LatestRow): PositionRecord {
  return {
    organizationId,
    deviceId: row.device_id,
    userId: row.user_id,
    buildingId: row.building_id,
    floorId: row.floor_id,
    indoor: row.indoor,
    x: row.x,
    y: row.y,
    lat: row.lat,
    lng: row.lng,
    yaw: row.yaw,
    accuracy: row.accuracy,
    timestamp: row.ts_ms,
    receivedAt: row.received_ms,
  };
}
