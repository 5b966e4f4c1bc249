import { isOutageError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { silenceEvidence, type EvidenceFix, type SilenceEvidence } from '../../shared/detection/silence-evidence.js';
import { pgArray } from '../../shared/storage/pg-array.js';
import type { Storage } from '../../shared/storage/index.js';
import type { AlarmService } from '../alarms/alarm-service.js';
import type { BuildingRegistry } from '../realtime/building-registry.js';
import type { DetectionEngine } from './detection-engine.js';
import type { StoredPlaceRow } from '../../shared/positions/position-record.js';
import { epochMs } from '../../shared/storage/epoch-ms.js';

export interface DeadmanEvidenceDependencies {
  storage: Storage;
  engine: DetectionEngine;
  registry: BuildingRegistry;
  alarms: Pick<AlarmService, 'amendDetails'>;
  logger: Logger;
  /** DETECTION_REORDER_WINDOW_SECONDS in ms: a fix that reached us later than this after it was taken reached us late. */
  reorderWindowMs: number;
  /** POSITIONS_MAX_AGE_SECONDS in ms: how far back a silence alarm a late fix may cover is looked for. */
  maxAgeMs: number;
}

interface SilenceAlarmRow {
  id: string;
  device_id: string;
  building_id: number | null;
  details: Record<string, unknown> | string;
}

interface EvidenceRow extends StoredPlaceRow {
  ts_ms: number;
  received_ms: number;
  total: number | string;
}

/** Fixes one alarm's evidence reads at most (its count stays exact). */
const MAX_READ = 20_000;

/**
 * Evidence for silence DEADMANs (issue 30, docs/event-time.md). A DEADMAN raised because a device went silent is
 * not withdrawn when the fixes it buffered meanwhile arrive: nobody could see the person then. But those fixes say
 * what happened, so the alarm gets them: each silence alarm of a device whose fixes reached us late is given, from
 * storage, the fixes taken during its silence (after its `since`, up to the arrival that ended it) that arrived
 * late, with whether they moved, as an `updated` event (details.silence_evidence; `silence_evidence` in the API).
 * Read from storage each time, so the evidence is the same whatever order and chunks the buffer came in.
 */
export class DeadmanEvidence {
  constructor(private readonly deps: DeadmanEvidenceDependencies) {}

  /** The silence alarms these records' late fixes cover get their evidence; rejects on an outage only. */
  async run(records: readonly PositionRecord[]): Promise<void> {
    const { reorderWindowMs, storage, maxAgeMs } = this.deps;
    const devices = new Set<string>();
    let from = Infinity;
    let through = -Infinity;
    for (const record of records) {
      if (record.receivedAt - record.timestamp <= reorderWindowMs) continue;
      devices.add(record.deviceId);
      from = Math.min(from, record.timestamp);
      through = Math.max(through, record.timestamp);
    }
    if (devices.size === 0) return;
    const organizationId = records[0]!.organizationId;
    try {
      const alarms = await storage.execute<SilenceAlarmRow>(
        `select id, device_id, building_id, details from alarms
         where organization_id = ? and device_id = any(?::text[]) and created_at >= to_timestamp(?::float8 / 1000)
           and type = 'DEADMAN' and details->>'reason' = 'silence' and (details->>'since')::timestamptz < to_timestamp(?::float8 / 1000)`,
        [organizationId, pgArray([...devices]), from - maxAgeMs, through],
      );
      for (const alarm of alarms) await this.alarm(organizationId, alarm);
    } catch (error) {
      if (isOutageError(error)) throw error;
      this.deps.logger.error({ err: error, organizationId }, 'evidence for silence alarms failed; the alarms stand as they are');
    }
  }

  private async alarm(organizationId: string, alarm: SilenceAlarmRow): Promise<void> {
    const { storage, reorderWindowMs } = this.deps;
    const details = typeof alarm.details === 'string' ? (JSON.parse(alarm.details) as Record<string, unknown>) : alarm.details;
    const since = Date.parse(String(details.since));
    if (!Number.isFinite(since)) return;
    // The silence ended with the first fix to reach us after it began (arrival time, as silence is judged).
    const [ended] = await storage.execute<{ at_ms: number | null }>(
      `select ${epochMs('min(received_at)')} as at_ms from positions
       where organization_id = ? and device_id = ? and ts > to_timestamp(?::float8 / 1000) and received_at > to_timestamp(?::float8 / 1000)`,
      [organizationId, alarm.device_id, since, since],
    );
    const until = ended?.at_ms ?? Date.now();
    const rows = await storage.execute<EvidenceRow>(
      // One per fix time: a buffer sent twice (an app retrying) is stored twice, but is the same evidence.
      `select *, count(*) over () as total from (
         select distinct on (ts) building_id, floor_id, x, y, lat, lng, ${epochMs('ts')} as ts_ms, ${epochMs('received_at')} as received_ms
         from positions
         where organization_id = ? and device_id = ? and ts > to_timestamp(?::float8 / 1000) and ts <= to_timestamp(?::float8 / 1000)
           and received_at > ts + make_interval(secs => ?::float8 / 1000)
         order by ts, received_at
       ) fixes order by ts_ms limit ?`,
      [organizationId, alarm.device_id, since, until, reorderWindowMs, MAX_READ],
    );
    if (rows.length === 0) return;
    const fixes: EvidenceFix[] = rows.map((row) => ({
      at: new Date(row.ts_ms).toISOString(),
      building_id: row.building_id,
      floor_id: row.floor_id,
      x: row.x,
      y: row.y,
      lat: row.lat,
      lng: row.lng,
      delay_ms: row.received_ms - row.ts_ms,
    }));
    const evidence = { ...silenceEvidence(fixes, await this.radiusOf(organizationId, alarm.building_id)), count: Number(rows[0]!.total) };
    const held = details.silence_evidence as SilenceEvidence | undefined;
    if (held && held.count === evidence.count && held.first_at === evidence.first_at && held.last_at === evidence.last_at) return;
    await this.deps.alarms.amendDetails(organizationId, alarm.id, { silence_evidence: evidence });
  }

  /** The building's dead-man radius (0 when unset): how far apart two fixes show movement. */
  private async radiusOf(organizationId: string, buildingId: number | null): Promise<number> {
    if (buildingId === null) return 0;
    const { registry, engine } = this.deps;
    const runtime = registry.peek(buildingId) ?? (await registry.get(organizationId, buildingId));
    return engine.buildings.of(runtime)?.deadman.deadmanRadiusM ?? 0;
  }
}
