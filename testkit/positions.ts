import type { PositionRecord } from '../shared/positions/position-record.js';

/** Position records as the pipeline builds them, for tests and benchmarks: each says only what it is about. */

/**
 * A position record: device `d` of organization `org`, indoor on floor 1 of building 1 at the origin, accurate to
 * 1 m, received when it was taken, unless `fields` say otherwise.
 */
export function positionRecord(fields: Partial<PositionRecord> & Pick<PositionRecord, 'timestamp'>): PositionRecord {
  return {
    organizationId: 'org',
    deviceId: 'd',
    userId: null,
    buildingId: 1,
    floorId: 1,
    indoor: true,
    x: 0,
    y: 0,
    lat: 0,
    lng: 0,
    yaw: 0,
    accuracy: 1,
    receivedAt: fields.timestamp,
    ...fields,
  };
}

/**
 * An outdoor position record (no building, floor or metres): device `d` of organization `org` at (1, 1), no
 * accuracy, received when it was taken, unless `fields` say otherwise.
 */
export const outdoorRecord = (fields: Partial<PositionRecord> & Pick<PositionRecord, 'timestamp'>): PositionRecord =>
  positionRecord({ buildingId: null, floorId: null, indoor: false, x: null, y: null, lat: 1, lng: 1, accuracy: null, ...fields });
