import { EntitySchema } from '@mikro-orm/core';

export interface Organization {
  id: string;
  name: string;
  /** An OPEN DEADMAN is closed when its device reports again (otherwise a person confirms). */
  deadmanAutoClose?: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export const OrganizationSchema = new EntitySchema<Organization>({
  name: 'Organization',
  tableName: 'organizations',
  properties: {
    id: { type: 'uuid', primary: true },
    name: { type: 'string' },
    deadmanAutoClose: { type: 'boolean', default: false, fieldName: 'deadman_auto_close' },
    createdAt: { type: 'Date', onCreate: () => new Date() },
    updatedAt: { type: 'Date', onCreate: () => new Date(), onUpdate: () => new Date() },
  },
});
