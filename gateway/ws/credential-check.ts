import { decodeJwt } from 'jose';
import type { Storage } from '../../shared/storage/index.js';
import { pgArray } from '../../shared/storage/pg-array.js';
import { revokedFamilies } from '../auth/credential-service.js';
import type { Principal } from '../auth/principal.js';

/** Ids per statement, so a check of every socket of a large gateway stays a few short reads. */
const CHUNK = 1000;

/**
 * Which of these principals no longer hold, read from storage (never from a cache, which a read in flight
 * during a revocation may have filled again): their user is gone or moved to another organization, their
 * credential version changed (a password or role change), the API key behind them is deleted, or the
 * refresh-token family of their bearer token was revoked (a reused refresh token). What an open
 * socket re-checks (gateway/ws/socket-revalidation.ts).
 */
export async function revokedAmong(storage: Storage, principals: readonly Principal[]): Promise<Set<Principal>> {
  const userIds = [...new Set(principals.map((principal) => principal.userId))];
  const keyIds = [...new Set(principals.flatMap((principal) => (principal.apiKeyId ? [principal.apiKeyId] : [])))];
  const users = new Map<string, { organizationId: string; credentialVersion: number }>();
  const familyIds = [...new Set(principals.flatMap((principal) => (principal.tokenFamilyId ? [principal.tokenFamilyId] : [])))];
  const keys = new Set<string>();
  const families = new Set<string>();
  for (let from = 0; from < userIds.length; from += CHUNK) {
    const rows = await storage.execute<{ id: string; organization_id: string; credential_version: number | null }>(
      'select id, organization_id, credential_version from users where id = any(?::uuid[])',
      [pgArray(userIds.slice(from, from + CHUNK))],
    );
    for (const row of rows)
      users.set(row.id, { organizationId: row.organization_id, credentialVersion: Number(row.credential_version ?? 0) });
  }
  for (let from = 0; from < keyIds.length; from += CHUNK) {
    const rows = await storage.execute<{ id: string }>('select id from api_keys where id = any(?::uuid[])', [
      pgArray(keyIds.slice(from, from + CHUNK)),
    ]);
    for (const row of rows) keys.add(row.id);
  }
  for (let from = 0; from < familyIds.length; from += CHUNK) {
    for (const family of await revokedFamilies(storage, familyIds.slice(from, from + CHUNK))) families.add(family);
  }
  const revoked = new Set<Principal>();
  for (const principal of principals) {
    const user = users.get(principal.userId);
    const holds =
      user !== undefined &&
      user.organizationId === principal.organizationId &&
      user.credentialVersion === (principal.credentialVersion ?? 0) &&
      (principal.apiKeyId === undefined || keys.has(principal.apiKeyId)) &&
      (principal.tokenFamilyId === undefined || !families.has(principal.tokenFamilyId));
    if (!holds) revoked.add(principal);
  }
  return revoked;
}

/** When a bearer token (already verified) expires, in epoch milliseconds; undefined for anything else (an API key). */
export function bearerExpiry(authorization: string | undefined): number | undefined {
  const bearer = /^Bearer\s+(\S+)$/i.exec(authorization ?? '');
  if (!bearer) return undefined;
  try {
    const { exp } = decodeJwt(bearer[1]!);
    return typeof exp === 'number' ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}
