import type { Role } from '../../shared/storage/entities/user.entity.js';

/** What a credential allows: everything its role allows, reads only, or position uploads only. */
export type ApiPermission = 'read-write' | 'read-only' | 'positioning';

/** The authenticated caller of a request or WebSocket. Everything is scoped by `organizationId`. */
export interface Principal {
  userId: string;
  email: string;
  organizationId: string;
  role: Role;
  platformAdmin: boolean;
  permission: ApiPermission;
  /** How the caller proved who they are. */
  via: 'jwt' | 'apikey' | 'basic';
  /** The API key behind the request (sent directly, or the one a token was minted from); revoking it ends the session. */
  apiKeyId?: string;
  /** The user's credential version the session was opened with; a password or role change bumps it. */
  credentialVersion?: number;
  /** The refresh-token family of the bearer token behind the session; revoking the family ends the session. */
  tokenFamilyId?: string;
  /** The key's own rate limits, when it overrides the deployment's. */
  limits?: { requestsPerSecond?: number | null; posesPerSecond?: number | null };
}
