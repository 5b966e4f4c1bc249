import { EntitySchema } from '@mikro-orm/core';
import { customFieldsProperty, organizationProperty, timestampProperties, type CustomField } from './common-properties.js';
import type { Organization } from './organization.entity.js';

/** Indoor POIs have a floor and both cartesians and georeferences; outdoor ones only a location. */
export interface Poi {
  id: number;
  organization: Organization;
  buildingId: number;
  floorId?: number | null;
  categoryId?: number | null;
  indoor: boolean;
  name: string;
  info: string;
  x?: number | null;
  y?: number | null;
  lat: number;
  lng: number;
  radius: number;
  customFields: CustomField[];
  createdAt: Date;
  updatedAt: Date;
}

export const PoiSchema = new EntitySchema<Poi>({
  name: 'Poi',
  tableName: 'pois',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    organization: organizationProperty,
    buildingId: { type: 'integer' },
    floorId: { type: 'integer', nullable: true },
    categoryId: { type: 'integer', nullable: true },
    indoor: { type: 'boolean' },
    name: { type: 'string' },
    info: { type: 'text', default: '' },
    x: { type: 'double', nullable: true },
    y: { type: 'double', nullable: true },
    lat: { type: 'double' },
    lng: { type: 'double' },
    radius: { type: 'double', default: 0 },
    customFields: customFieldsProperty,
    ...timestampProperties,
  },
});
