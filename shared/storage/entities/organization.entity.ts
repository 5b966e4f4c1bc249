import { EntitySchema } from '@mikro-orm/core';

export interface Organization {
  id: string;
  name: string;
  createdAt: Date;
  updatedAt: Date;
}

export const OrganizationSchema = new EntitySchema<Organization>({
  name: 'Organization',
  tableName: 'organizations',
  properties: {
    id: { type: 'uuid', primary: true },
    name: { type: 'string' },
    createdAt: { type: 'Date', onCreate: () => new Date() },
    updatedAt: { type: 'Date', onCreate: () => new Date(), onUpdate: () => new Date() },
  },
});
