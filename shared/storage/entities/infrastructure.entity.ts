import { EntitySchema } from '@mikro-orm/core';
import { organizationProperty, timestampProperties } from './common-properties.js';
import type { Organization } from './organization.entity.js';

/** A Wi-Fi access point (BSSID) or a BLE beacon (UUID, major, minor) placed on a floor. */
export interface InfrastructureItem {
  id: number;
  organization: Organization;
  buildingId: number;
  floorId: number;
  kind: 'wifi' | 'ble';
  name: string;
  bssid?: string | null;
  ssid?: string | null;
  uuid?: string | null;
  major?: number | null;
  minor?: number | null;
  /** Transmit power: dBm at 1 m for beacons, dBm for access points. */
  txPower?: number | null;
  x: number;
  y: number;
  lat: number;
  lng: number;
  createdAt: Date;
  updatedAt: Date;
}

export const InfrastructureSchema = new EntitySchema<InfrastructureItem>({
  name: 'InfrastructureItem',
  tableName: 'infrastructure',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    organization: organizationProperty,
    buildingId: { type: 'integer' },
    floorId: { type: 'integer' },
    kind: { type: 'string' },
    name: { type: 'string', default: '' },
    bssid: { type: 'string', nullable: true },
    ssid: { type: 'string', nullable: true },
    uuid: { type: 'string', nullable: true },
    major: { type: 'integer', nullable: true },
    minor: { type: 'integer', nullable: true },
    txPower: { type: 'double', nullable: true },
    x: { type: 'double' },
    y: { type: 'double' },
    lat: { type: 'double' },
    lng: { type: 'double' },
    ...timestampProperties,
  },
});
