import { EntitySchema } from '@mikro-orm/core';
import type { User } from './user.entity.js';

/** One-time refresh token: used once, then revoked and replaced (rotation). Stored as a SHA-256. */
export interface RefreshToken {
  id: string;
  user: User;
  tokenHash: string;
  /** The permission of the credential that started this chain (a read-only key stays read-only). */
  permission: string;
  expiresAt: Date;
  createdAt: Date;
  revokedAt?: Date | null;
  /** The API key this chain was started from: deleting the key deletes the chain. */
  apiKeyId?: string | null;
  /** The user's credential version when the chain started; a password or role change ends the chain. */
  credentialVersion?: number;
  /** The first token of this rotation chain (its own id for a new sign-in): a reused token revokes the family. */
  familyId?: string | null;
  /** When the whole family was revoked (a used token presented again): its access tokens are refused too. */
  familyRevokedAt?: Date | null;
}

export const RefreshTokenSchema = new EntitySchema<RefreshToken>({
  name: 'RefreshToken',
  tableName: 'refresh_tokens',
  properties: {
    id: { type: 'uuid', primary: true },
    user: { kind: 'm:1', entity: 'User', fieldName: 'user_id' },
    tokenHash: { type: 'string', unique: true },
    permission: { type: 'string' },
    expiresAt: { type: 'Date' },
    createdAt: { type: 'Date', onCreate: () => new Date() },
    revokedAt: { type: 'Date', nullable: true },
    apiKeyId: { type: 'uuid', fieldName: 'api_key_id', nullable: true },
    credentialVersion: { type: 'integer', default: 0 },
    familyId: { type: 'uuid', fieldName: 'family_id', nullable: true },
    familyRevokedAt: { type: 'Date', fieldName: 'family_revoked_at', nullable: true },
  },
});
