import { EntitySchema } from '@mikro-orm/core';
import { customFieldsProperty, organizationProperty, timestampProperties, type CustomField } from './common-properties.js';
import type { Organization } from './organization.entity.js';

export const GEOFENCE_TYPES = ['POINT', 'LINE', 'POLYGON', 'CIRCLE'] as const;
export type GeofenceType = (typeof GEOFENCE_TYPES)[number];

/** Area / geofence. `geometric` is [lat, lng] pairs as the spec shows; `cartesians` the same points in metres. */
export interface Geofence {
  id: string;
  organization: Organization;
  buildingId: number;
  floorId: number;
  name: string;
  code: string;
  description?: string | null;
  info?: string | null;
  type: GeofenceType;
  geometric: [number, number][];
  cartesians: [number, number][];
  /** CIRCLE radius, and the capture distance of POINT and LINE, in metres. */
  radius?: number | null;
  /** Seconds; staying longer raises GEOFENCE_MAX_STAY_TIME. */
  maxStayTime?: number | null;
  /** Debounce: seconds inside before `enter` fires. */
  minDwellS: number;
  /** Debounce: seconds outside before `exit` fires. */
  exitGraceS: number;
  /** An assembly point of evacuations (a closed shape: POLYGON or CIRCLE); may lie outside the building's footprint. */
  musterPoint: boolean;
  customFields: CustomField[];
  /** Bumped whenever what a position is tested against changes (floor, type, points, radius); not by a rename. */
  geometryVersion: number;
  /** When the current geometry took effect: reports read stays computed against it only from then on. */
  geometrySince: Date;
  deleted: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export const GeofenceSchema = new EntitySchema<Geofence>({
  name: 'Geofence',
  tableName: 'geofences',
  properties: {
    id: { type: 'uuid', primary: true },
    organization: organizationProperty,
    buildingId: { type: 'integer' },
    floorId: { type: 'integer' },
    name: { type: 'string' },
    code: { type: 'string', default: '' },
    description: { type: 'text', nullable: true },
    info: { type: 'text', nullable: true },
    type: { type: 'string' },
    geometric: { type: 'json' },
    cartesians: { type: 'json' },
    radius: { type: 'double', nullable: true },
    maxStayTime: { type: 'integer', nullable: true },
    minDwellS: { type: 'integer', default: 0, fieldName: 'min_dwell_s' },
    exitGraceS: { type: 'integer', default: 0, fieldName: 'exit_grace_s' },
    musterPoint: { type: 'boolean', default: false, fieldName: 'muster_point' },
    customFields: customFieldsProperty,
    geometryVersion: { type: 'integer', default: 1, fieldName: 'geometry_version' },
    geometrySince: { type: 'Date', fieldName: 'geometry_since' },
    deleted: { type: 'boolean', default: false },
    ...timestampProperties,
  },
});
