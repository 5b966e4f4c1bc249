import { EntitySchema } from '@mikro-orm/core';
import type { Organization } from './organization.entity.js';

/** Groups associate users under a name; a user is in at most one group. */
export interface Group {
  id: string;
  organization: Organization;
  name: string;
  description: string;
  createdAt: Date;
  updatedAt: Date;
}

export const GroupSchema = new EntitySchema<Group>({
  name: 'Group',
  tableName: 'groups',
  properties: {
    id: { type: 'uuid', primary: true },
    organization: { kind: 'm:1', entity: 'Organization', fieldName: 'organization_id' },
    name: { type: 'string' },
    description: { type: 'text', default: '' },
    createdAt: { type: 'Date', onCreate: () => new Date() },
    updatedAt: { type: 'Date', onCreate: () => new Date(), onUpdate: () => new Date() },
  },
});
