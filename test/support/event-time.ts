import { expect } from 'vitest';
import type { TestClient } from './http-client.js';
import { squareCartesians } from './cartography.js';
import type { RunningGateway } from './test-gateway.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface StoredZoneEvent {
  id: string;
  type: 'enter' | 'exit';
  zone_id: string;
  at_ms: number;
  late: boolean;
  delay_ms: number | null;
  supersedes: string | null;
  superseded: boolean;
}

export interface StoredMaxStay {
  id: string;
  state: string;
  geofence_id: string;
  details: Record<string, unknown>;
}

/** One venue's devices, uploads and what detection stored for them, for the event-time tests. */
export class EventTimeVenue {
  private sentinelTurn = 0;
  private sentinelFence?: string;

  constructor(
    private readonly running: RunningGateway,
    private readonly admin: TestClient,
    readonly buildingId: number,
    readonly floorId: number,
  ) {}

  async fence(name: string, x: number, y: number, size: number, extra: object = {}): Promise<string> {
    const created = await this.admin.post('/api/v1/geofences', {
      name,
      building_id: this.buildingId,
      floor_id: this.floorId,
      type: 'POLYGON',
      cartesians: squareCartesians(x, y, size),
      ...extra,
    });
    expect(created.status, created.text).toBe(201);
    return created.body.id;
  }

  pose(deviceId: string, timestamp: number, x: number, y: number) {
    return { device_id: deviceId, timestamp, building_id: this.buildingId, floor_id: this.floorId, x, y };
  }

  async upload(poses: object[]): Promise<void> {
    const answer = await this.admin.post('/api/v1/realtime/positions', { poses });
    expect(answer.status, answer.text).toBe(204);
  }

  /**
   * Waits until detection has finished everything uploaded so far: a sentinel device enters (then leaves) a fence
   * of its own in two uploads, each waited for; the owner runs a shard's reads one after the other, late path
   * included, and stores an organization's detections in order, so once the second is stored so is all before it.
   */
  async settle(): Promise<void> {
    this.sentinelFence ??= await this.fence('Sentinel', 100, 60, 10);
    for (let round = 0; round < 2; round++) {
      const turn = ++this.sentinelTurn;
      const inside = turn % 2 === 1;
      await this.upload([this.pose('sentinel', Date.now(), inside ? 105 : 115, inside ? 65 : 75)]);
      const deadline = Date.now() + 30_000;
      while ((await this.zoneEvents('sentinel')).length < turn) {
        if (Date.now() > deadline) throw new Error('detection did not settle');
        await sleep(25);
      }
    }
  }

  zoneEvents(deviceId: string): Promise<StoredZoneEvent[]> {
    return this.running.gateway.services.storage.execute<StoredZoneEvent>(
      `select id::text as id, type, zone_id, round(extract(epoch from at) * 1000)::float8 as at_ms, late, delay_ms::float8 as delay_ms,
              supersedes::text as supersedes, superseded
       from zone_events where device_id = ? order by at, id`,
      [deviceId],
    );
  }

  maxStays(deviceId: string): Promise<StoredMaxStay[]> {
    return this.running.gateway.services.storage.execute<StoredMaxStay>(
      `select id, state, geofence_id, details from alarms where device_id = ? and type = 'GEOFENCE_MAX_STAY_TIME' order by created_at`,
      [deviceId],
    );
  }
}
