import { EntitySchema } from '@mikro-orm/core';
import type { Organization } from './organization.entity.js';
import type { User } from './user.entity.js';

/** A tracked device; `identifier` is what the app sends as `device_id`, unique within the organization. */
export interface Device {
  id: string;
  organization: Organization;
  identifier: string;
  name: string;
  /** Owner; reports' `only_assigned` keeps only devices that have one. */
  user?: User | null;
  createdAt: Date;
  updatedAt: Date;
}

export const DeviceSchema = new EntitySchema<Device>({
  name: 'Device',
  tableName: 'devices',
  properties: {
    id: { type: 'uuid', primary: true },
    organization: { kind: 'm:1', entity: 'Organization', fieldName: 'organization_id' },
    identifier: { type: 'string' },
    name: { type: 'string', default: '' },
    user: { kind: 'm:1', entity: 'User', fieldName: 'user_id', nullable: true },
    createdAt: { type: 'Date', onCreate: () => new Date() },
    updatedAt: { type: 'Date', onCreate: () => new Date(), onUpdate: () => new Date() },
  },
});
