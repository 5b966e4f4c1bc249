import { sqlOf, type Execute } from './report-sql.js';

/**
 * STAND-IN, to be deleted when h/stays lands (issue 18). The materializer's interface, declared exactly as
 * shared/reports/materializer.ts declares it (the stays branch owns that file and the real watermark), so that
 * the rollups compile and are tested before the merge: the integrator points the imports at materializer.ts
 * and deletes this file.
 */
export interface DeviceHour {
  organizationId: string;
  deviceId: string;
  hour: Date /* start of a UTC hour */;
}

export interface Materialization {
  readonly name: string;
  /** Replaces what this materialization keeps for these device-hours with what the raw positions say, in the caller's transaction. */
  rebuild(execute: Execute, units: readonly DeviceHour[]): Promise<void>;
}

/**
 * STAND-IN watermark: the receipt time up to which every device-hour has been rebuilt. Null (the default):
 * nothing is materialised yet, so every device-hour is pending and reports read raw positions only, as before.
 */
let standInWatermark: Date | null = null;

/** STAND-IN: what the materializer records after a pass; tests set it after rebuilding their device-hours. */
export function setStandInWatermark(at: Date | null): void {
  standInWatermark = at;
}

/**
 * STAND-IN, same SQL shape as the real one: device-hours of this window whose rows were received after the
 * watermark; a report computes these from raw positions.
 */
export async function pendingDeviceHours(execute: Execute, organizationId: string, from: Date, to: Date): Promise<DeviceHour[]> {
  const rows = await execute<{ device_id: string; hour_ms: string }>(
    sqlOf(
      `select distinct p.device_id, (extract(epoch from date_bin('1 hour', p.ts, '2000-01-01T00:00:00Z')) * 1000)::int8 as hour_ms
       from positions p where p.organization_id = ? and p.ts >= ? and p.ts < ?${standInWatermark ? ' and p.received_at > ?' : ''}`,
      organizationId,
      from.toISOString(),
      to.toISOString(),
      ...(standInWatermark ? [standInWatermark.toISOString()] : []),
    ),
  );
  return rows.map((row) => ({ organizationId, deviceId: row.device_id, hour: new Date(Number(row.hour_ms)) }));
}
