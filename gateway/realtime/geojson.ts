import type { PositionRecord } from '../../shared/positions/position-record.js';

/**
 * GeoJSON of a live position (spec 2.9). Coordinates are [latitude, longitude]: the spec declares
 * [longitude, latitude] but its sample, and the official client (which swaps them before drawing), use
 * latitude first, so that is what we send.
 */
export interface PositionFeature {
  type: 'Feature';
  id: string;
  geometry: { type: 'Point'; coordinates: [number, number] };
  properties: {
    device_id: string;
    user_id: string | null;
    building_id: number | null;
    floor_id: number | null;
    level_height: number | null;
    indoor: boolean;
    time: string;
    yaw: number;
    accuracy: number | null;
    local_coordinates: [number, number] | null;
    /** On the REST views: false while the person is outside their tracking window (their last position is stale by design). */
    tracked_now?: boolean;
  };
}

export function toFeature(record: PositionRecord, levelHeight: number | null = null): PositionFeature {
  return {
    type: 'Feature',
    id: record.deviceId,
    geometry: { type: 'Point', coordinates: [record.lat, record.lng] },
    properties: {
      device_id: record.deviceId,
      user_id: record.userId,
      building_id: record.buildingId,
      floor_id: record.floorId,
      level_height: levelHeight,
      indoor: record.indoor,
      time: new Date(record.timestamp).toISOString(),
      yaw: record.yaw,
      accuracy: record.accuracy,
      local_coordinates: record.x === null || record.y === null ? null : [record.x, record.y],
    },
  };
}
