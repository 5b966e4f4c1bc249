import type { ZoneEventRecord } from './zone-event.js';

/**
 * Stores zone events in the caller's transaction, every column included: an event given an `id` keeps it (the
 * late path names its corrections before storing them), one without takes the next of the table's sequence; the
 * event-time columns (`late`, `delay_ms`, `supersedes`) default as an on-time event's. The hot path's group
 * commit writes on-time events its own faster way (shared/positions/position-store.ts).
 */
export async function insertZoneEvents(
  execute: (sql: string, params: unknown[]) => Promise<unknown>,
  zoneEvents: readonly ZoneEventRecord[],
): Promise<void> {
  if (zoneEvents.length === 0) return;
  const rows = zoneEvents.map((e) => ({
    i: e.id ?? null,
    o: e.organizationId,
    b: e.buildingId,
    f: e.floorId,
    k: e.zoneKind,
    z: e.zoneId,
    d: e.deviceId,
    u: e.userId,
    t: e.type,
    a: e.at,
    r: e.firedAt,
    l: e.late ?? false,
    m: e.delayMs ?? null,
    s: e.supersedes ?? null,
  }));
  await execute(
    `insert into zone_events (id, organization_id, building_id, floor_id, zone_kind, zone_id, device_id, user_id, type, at, fired_at, late, delay_ms, supersedes)
     select coalesce(i, nextval(pg_get_serial_sequence('zone_events', 'id'))), o, b, f, k, z, d, u, t, to_timestamp(a / 1000), to_timestamp(r / 1000), l, m, s
     from jsonb_to_recordset(?::jsonb) as e(i bigint, o uuid, b int, f int, k text, z text, d text, u uuid, t text, a float8, r float8, l boolean, m bigint, s bigint)`,
    [JSON.stringify(rows)],
  );
}
