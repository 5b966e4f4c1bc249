import type { PositionRecord } from '../../shared/positions/position-record.js';

export interface LiveQuery {
  organizationId: string;
  buildingIds?: readonly number[];
  deviceIds?: readonly string[];
  userIds?: readonly string[];
  indoor?: boolean;
  /** Only positions received at or after this time (epoch ms). */
  since?: number;
}

/**
 * The latest position of every device, per organization, in memory: of the positions this gateway receives (its
 * own uploads, and the shards it has an interest in, realtime/position-interest.ts). A record is the pipeline's
 * change record itself.
 */
export class LiveState {
  private readonly byOrganization = new Map<string, Map<string, PositionRecord>>();

  /** Keeps the record if it is newer than the device's current one; returns whether it was kept. */
  apply(record: PositionRecord): boolean {
    let devices = this.byOrganization.get(record.organizationId);
    if (!devices) this.byOrganization.set(record.organizationId, (devices = new Map()));
    const current = devices.get(record.deviceId);
    if (current && current.timestamp > record.timestamp) return false;
    devices.set(record.deviceId, record);
    return true;
  }

  /** The device's latest position held, if any. */
  latest(organizationId: string, deviceId: string): PositionRecord | undefined {
    return this.byOrganization.get(organizationId)?.get(deviceId);
  }

  query(query: LiveQuery): PositionRecord[] {
    const devices = this.byOrganization.get(query.organizationId);
    if (!devices) return [];
    const buildings = query.buildingIds ? new Set(query.buildingIds) : undefined;
    const deviceIds = query.deviceIds ? new Set(query.deviceIds) : undefined;
    const userIds = query.userIds ? new Set(query.userIds) : undefined;
    const out: PositionRecord[] = [];
    for (const record of devices.values()) {
      if (buildings && (record.buildingId === null || !buildings.has(record.buildingId))) continue;
      if (deviceIds && !deviceIds.has(record.deviceId)) continue;
      if (userIds && (record.userId === null || !userIds.has(record.userId))) continue;
      if (query.indoor !== undefined && record.indoor !== query.indoor) continue;
      if (query.since !== undefined && record.receivedAt < query.since) continue;
      out.push(record);
    }
    return out.sort((a, b) => (a.deviceId < b.deviceId ? -1 : 1));
  }

  /** Forgets devices not heard from since `before` (epoch ms), so memory follows the active fleet. */
  evictOlderThan(before: number): number {
    let evicted = 0;
    for (const [organizationId, devices] of this.byOrganization) {
      for (const [deviceId, record] of devices) {
        if (record.receivedAt < before) {
          devices.delete(deviceId);
          evicted++;
        }
      }
      if (devices.size === 0) this.byOrganization.delete(organizationId);
    }
    return evicted;
  }

  get size(): number {
    let size = 0;
    for (const devices of this.byOrganization.values()) size += devices.size;
    return size;
  }
}
