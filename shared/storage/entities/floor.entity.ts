import { EntitySchema } from '@mikro-orm/core';
import { customFieldsProperty, organizationProperty, timestampProperties, type CustomField } from './common-properties.js';
import type { Organization } from './organization.entity.js';

export interface Floor {
  id: number;
  organization: Organization;
  buildingId: number;
  name: string;
  level: number;
  levelHeight: number;
  /** Pixels per metre of the floorplan image. */
  scale?: number | null;
  /** The floorplan image (see /api/v1/images). */
  mapId?: string | null;
  customFields: CustomField[];
  createdAt: Date;
  updatedAt: Date;
}

export const FloorSchema = new EntitySchema<Floor>({
  name: 'Floor',
  tableName: 'floors',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    organization: organizationProperty,
    buildingId: { type: 'integer' },
    name: { type: 'string', default: '' },
    level: { type: 'integer' },
    levelHeight: { type: 'double', default: 0 },
    scale: { type: 'double', nullable: true },
    mapId: { type: 'uuid', nullable: true },
    customFields: customFieldsProperty,
    ...timestampProperties,
  },
});
