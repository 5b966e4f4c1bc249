import { EntitySchema } from '@mikro-orm/core';
import { customFieldsProperty, organizationProperty, timestampProperties, type CustomField } from './common-properties.js';
import type { Organization } from './organization.entity.js';

/** A circle on a floor, in both coordinate systems. */
export interface Circle {
  floorId: number;
  x: number;
  y: number;
  lat: number;
  lng: number;
  radius: number;
}

/** A circular trigger area carrying HTML shown to users passing by, plus an optional conversion area. */
export interface CartographyEvent {
  id: number;
  organization: Organization;
  buildingId: number;
  name: string;
  /** Sanitised HTML, safe to render. */
  info: string;
  /** The HTML exactly as sent. */
  infoUnsafe: string;
  url?: string | null;
  floorId: number;
  x: number;
  y: number;
  lat: number;
  lng: number;
  radius: number;
  conversion?: Circle | null;
  customFields: CustomField[];
  createdAt: Date;
  updatedAt: Date;
}

export const EventSchema = new EntitySchema<CartographyEvent>({
  name: 'CartographyEvent',
  tableName: 'events',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    organization: organizationProperty,
    buildingId: { type: 'integer' },
    name: { type: 'string' },
    info: { type: 'text', default: '' },
    infoUnsafe: { type: 'text', default: '' },
    url: { type: 'text', nullable: true },
    floorId: { type: 'integer' },
    x: { type: 'double' },
    y: { type: 'double' },
    lat: { type: 'double' },
    lng: { type: 'double' },
    radius: { type: 'double' },
    conversion: { type: 'json', nullable: true },
    customFields: customFieldsProperty,
    ...timestampProperties,
  },
});
