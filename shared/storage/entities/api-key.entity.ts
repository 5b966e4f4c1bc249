import { EntitySchema } from '@mikro-orm/core';
import type { Organization } from './organization.entity.js';
import type { User } from './user.entity.js';

export const API_KEY_PERMISSIONS = ['read-only', 'read-write', 'positioning'] as const;
export type ApiKeyPermission = (typeof API_KEY_PERMISSIONS)[number];

/** An API key acts as its user, narrowed by `permission`. Only a SHA-256 of the key is stored. */
export interface ApiKey {
  id: string;
  organization: Organization;
  user: User;
  keyHash: string;
  /** Enough of the key to recognise it in a list (`fc_abcd…wxyz`), never enough to use it. */
  keyHint: string;
  permission: ApiKeyPermission;
  description: string;
  createdAt: Date;
  lastUsedAt?: Date | null;
  /** Overrides of the deployment's rate limits for this key (null: the deployment's). */
  requestsPerSecond?: number | null;
  posesPerSecond?: number | null;
}

export const ApiKeySchema = new EntitySchema<ApiKey>({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: {
    id: { type: 'uuid', primary: true },
    organization: { kind: 'm:1', entity: 'Organization', fieldName: 'organization_id' },
    user: { kind: 'm:1', entity: 'User', fieldName: 'user_id' },
    keyHash: { type: 'string', unique: true },
    keyHint: { type: 'string' },
    permission: { type: 'string' },
    description: { type: 'text', default: '' },
    createdAt: { type: 'Date', onCreate: () => new Date() },
    lastUsedAt: { type: 'Date', nullable: true },
    requestsPerSecond: { type: 'integer', nullable: true },
    posesPerSecond: { type: 'integer', nullable: true },
  },
});
