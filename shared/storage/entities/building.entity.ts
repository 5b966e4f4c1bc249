import { EntitySchema } from '@mikro-orm/core';
import { customFieldsProperty, organizationProperty, timestampProperties, type CustomField } from './common-properties.js';
import type { Organization } from './organization.entity.js';

/** A venue, placed on the globe by its centre, size and rotation (see shared/geo/building-transform.ts). */
export interface Building {
  id: number;
  organization: Organization;
  userId?: string | null;
  name: string;
  description?: string | null;
  info?: string | null;
  locationLat: number;
  locationLng: number;
  width: number;
  length: number;
  rotation: number;
  customFields: CustomField[];
  pictureId?: string | null;
  /** Dead-man thresholds (detector off while unset). */
  deadmanAfterS?: number | null;
  deadmanRadiusM?: number | null;
  deadmanSilenceS?: number | null;
  /** Silence storm thresholds (null: the defaults, see shared/detection/storm.detector.ts). */
  stormShare?: number | null;
  stormMinDevices?: number | null;
  createdAt: Date;
  updatedAt: Date;
}

export const BuildingSchema = new EntitySchema<Building>({
  name: 'Building',
  tableName: 'buildings',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    organization: organizationProperty,
    userId: { type: 'uuid', nullable: true, fieldName: 'user_id' },
    name: { type: 'string' },
    description: { type: 'text', nullable: true },
    info: { type: 'text', nullable: true },
    locationLat: { type: 'double' },
    locationLng: { type: 'double' },
    width: { type: 'double' },
    length: { type: 'double' },
    rotation: { type: 'double' },
    customFields: customFieldsProperty,
    pictureId: { type: 'uuid', nullable: true },
    deadmanAfterS: { type: 'integer', nullable: true, fieldName: 'deadman_after_s' },
    deadmanRadiusM: { type: 'double', nullable: true, fieldName: 'deadman_radius_m' },
    deadmanSilenceS: { type: 'integer', nullable: true, fieldName: 'deadman_silence_s' },
    stormShare: { type: 'double', nullable: true, fieldName: 'storm_share' },
    stormMinDevices: { type: 'integer', nullable: true, fieldName: 'storm_min_devices' },
    ...timestampProperties,
  },
});
