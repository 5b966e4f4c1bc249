import { EntitySchema } from '@mikro-orm/core';
import type { Group } from './group.entity.js';
import type { Organization } from './organization.entity.js';

export const ROLES = ['admin', 'user_manager', 'user'] as const;
export type Role = (typeof ROLES)[number];

export interface User {
  id: string;
  organization: Organization;
  /** Stored lower-cased: e-mail is case-insensitive for sign-in. Unique within the organization only (issue 28, L1). */
  email: string;
  passwordHash: string;
  fullName: string;
  role: Role;
  /** The first administrator; the only one who may create organizations. */
  platformAdmin: boolean;
  /** A user belongs to at most one group. */
  group?: Group | null;
  code?: string | null;
  locale?: string | null;
  info?: string | null;
  /** Buildings the user is assigned to. */
  buildingIds: number[];
  /** Bumped by a password or role change: tokens and refresh chains minted under an older one are refused. */
  credentialVersion?: number;
  createdAt: Date;
  updatedAt: Date;
}

export const UserSchema = new EntitySchema<User>({
  name: 'User',
  tableName: 'users',
  properties: {
    id: { type: 'uuid', primary: true },
    organization: { kind: 'm:1', entity: 'Organization', fieldName: 'organization_id' },
    email: { type: 'string', index: 'users_email_idx' },
    passwordHash: { type: 'string', hidden: true },
    fullName: { type: 'string' },
    role: { type: 'string' },
    platformAdmin: { type: 'boolean', default: false },
    group: { kind: 'm:1', entity: 'Group', fieldName: 'group_id', nullable: true },
    code: { type: 'string', nullable: true },
    locale: { type: 'string', nullable: true },
    info: { type: 'text', nullable: true },
    buildingIds: { type: 'integer[]', default: [] },
    credentialVersion: { type: 'integer', default: 0 },
    createdAt: { type: 'Date', onCreate: () => new Date() },
    updatedAt: { type: 'Date', onCreate: () => new Date(), onUpdate: () => new Date() },
  },
  uniques: [{ name: 'users_organization_email_key', properties: ['organization', 'email'] }],
});
