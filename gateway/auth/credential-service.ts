import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../shared/config.js';
import { AmbiguousCredentialsError, ErrorCode, UnauthenticatedError, ValidationError } from '../../shared/errors.js';
import { hashPassword, verifyPassword } from '../../shared/passwords.js';
import type { Storage } from '../../shared/storage/index.js';
import { pgArray } from '../../shared/storage/pg-array.js';
import {
  ApiKeySchema,
  RefreshTokenSchema,
  UserSchema,
  type ApiKey,
  type ApiKeyPermission,
  type User,
} from '../../shared/storage/entities/index.js';
import type { ApiPermission } from './principal.js';
import { createLimiterBackend } from './limiter-backend.js';
import { LoginThrottle } from './login-throttle.js';
import type { TokenService } from './token-service.js';

export interface TokenPair {
  access_token: string;
  refresh_token: string;
}

/** API keys and refresh tokens are long random secrets, so a fast hash is enough to store and look them up. */
export const sha256 = (secret: string) => createHash('sha256').update(secret).digest('base64url');

const REFRESH_TTL_MS = 30 * 24 * 3600 * 1000;
const API_KEY_PREFIX = 'fc_';

/**
 * Accounts of one e-mail (one per organization holding it) whose passwords a sign-in checks, oldest first: each
 * check is a 32 MiB scrypt, and four run side by side on Node's thread pool. A fifth account of one e-mail signs
 * in with an API key; the oldest four (the e-mail's first holders) are never pushed out by later ones.
 */
const MAX_ACCOUNTS_CHECKED = 4;

/** Compared against when the e-mail is unknown, so a wrong e-mail costs as much time as a wrong password. */
let decoyHash: Promise<string> | undefined;

export const invalidCredentials = () => new UnauthenticatedError('Invalid credentials', ErrorCode.InvalidCredentials);

/** The credential a token came from was revoked: its API key deleted, or the user's password changed. */
export const credentialRevoked = () =>
  new UnauthenticatedError('The credential of this token was revoked; sign in again', ErrorCode.InvalidCredentials);

/**
 * Checks credentials and mints tokens: e-mail + password (throttled per account, address and both), API
 * keys, and one-time refresh tokens that rotate on use. Every token and refresh chain names the credential
 * it came from (the user's credential version, and the API key if any) so revoking it refuses them.
 */
export class CredentialService {
  private readonly maxKeysPerUser: number;

  constructor(
    private readonly storage: Storage,
    private readonly tokens: TokenService,
    config: Config,
    private readonly throttle = new LoginThrottle(
      createLimiterBackend({ ...config, REDIS_URL: undefined, REDIS_CLUSTER_NODES: undefined }),
      config,
    ),
    private readonly now: () => number = Date.now,
  ) {
    this.maxKeysPerUser = config.MAX_API_KEYS_PER_USER;
  }

  /**
   * The attempt is counted before the hash is checked (see LoginThrottle): once a budget is spent, every
   * attempt gets 429, the right password included, until the window ends.
   */
  async loginWithPassword(
    emailInput: string,
    password: string,
    address: string,
    outcome?: (user: User, ok: boolean) => Promise<void>,
  ): Promise<User> {
    const email = emailInput.trim().toLowerCase();
    const succeeded = await this.throttle.attempt(email, address);
    const candidates = await this.storage
      .em()
      .find(UserSchema, { email }, { populate: ['organization'], orderBy: { createdAt: 'asc', id: 'asc' }, limit: MAX_ACCOUNTS_CHECKED });
    const matched = await this.matchingAccounts(candidates, password);
    if (matched.length === 1) await outcome?.(matched[0]!, true);
    else if (matched.length === 0) for (const user of candidates) await outcome?.(user, false);
    if (matched.length === 0) throw invalidCredentials();
    if (matched.length > 1) {
      throw new AmbiguousCredentialsError(
        'This e-mail and password open accounts in several organizations; sign in with an API key, or give each account its own password',
      );
    }
    await succeeded();
    return matched[0]!;
  }

  /**
   * E-mails are unique per organization (so one organization cannot learn about another's users), and the
   * password picks the account. The hashes are checked side by side on the thread pool, and against a decoy
   * when the e-mail is unknown, so an answer takes about as long whatever the number of accounts.
   */
  private async matchingAccounts(candidates: User[], password: string): Promise<User[]> {
    if (candidates.length === 0) {
      await verifyPassword(password, await (decoyHash ??= hashPassword(randomUUID())));
      return [];
    }
    const verdicts = await Promise.all(candidates.map((user) => verifyPassword(password, user.passwordHash)));
    return candidates.filter((_, index) => verdicts[index]);
  }

  /** `X-API-KEY` alone (as the official client sends it) or with `X-API-EMAIL`, which must then be the key's owner. */
  async loginWithApiKey(key: string, email?: string): Promise<{ user: User; apiKey: ApiKey }> {
    const apiKey = await this.storage.em().findOne(ApiKeySchema, { keyHash: sha256(key) }, { populate: ['user', 'user.organization'] });
    if (!apiKey) throw invalidCredentials();
    if (email !== undefined && apiKey.user.email !== email.trim().toLowerCase()) throw invalidCredentials();
    await this.markApiKeyUsed(apiKey.keyHash);
    return { user: apiKey.user, apiKey };
  }

  /** Records when a key was last used; called on sign-in and when a gateway (re)loads the key, not per request. */
  async markApiKeyUsed(keyHash: string): Promise<void> {
    await this.storage.execute('update api_keys set last_used_at = ? where key_hash = ?', [new Date(this.now()), keyHash]);
  }

  /** A token pair for `user`; `apiKey` when it was minted from one, so deleting the key revokes the pair. */
  async issueTokens(user: User, permission: ApiPermission, apiKey?: ApiKey, familyId?: string): Promise<TokenPair> {
    const refreshToken = randomBytes(32).toString('base64url');
    const credentialVersion = user.credentialVersion ?? 0;
    const em = this.storage.em();
    const id = randomUUID();
    const family = familyId ?? id;
    em.create(RefreshTokenSchema, {
      id,
      familyId: family,
      user: em.getReference(UserSchema, user.id),
      tokenHash: sha256(refreshToken),
      permission,
      expiresAt: new Date(this.now() + REFRESH_TTL_MS),
      createdAt: new Date(this.now()),
      apiKeyId: apiKey?.id ?? null,
      credentialVersion,
    });
    await em.flush();
    const organizationId = typeof user.organization === 'object' ? user.organization.id : (user.organization as string);
    const accessToken = await this.tokens.sign({
      sub: user.id,
      email: user.email,
      organization_uuid: organizationId,
      role: user.role,
      api_permission: permission,
      ...(user.platformAdmin ? { platform_admin: true } : {}),
      cv: credentialVersion,
      ...(apiKey ? { key_id: apiKey.id } : {}),
      fid: family,
    });
    return { access_token: accessToken, refresh_token: refreshToken };
  }

  /**
   * Rotation: the refresh token is consumed (revoked) and a new pair issued. It must belong to the same
   * user as the access token, whose signature is checked even if it has expired. A token presented again
   * after its use is taken as stolen: its whole chain is revoked, so neither the thief nor the owner can rotate
   * further (the owner signs in again), and `reused` is told the family, whose access tokens must then be
   * refused everywhere (the caller announces it: RequestAuthenticator.invalidate).
   */
  async refresh(accessToken: string, refreshToken: string, reused?: (user: User, familyId: string) => Promise<void>): Promise<TokenPair> {
    const claims = await this.tokens.verifyIgnoringExpiry(accessToken);
    const em = this.storage.em();
    const stored = await em.findOne(RefreshTokenSchema, { tokenHash: sha256(refreshToken) }, { populate: ['user', 'user.organization'] });
    if (stored?.revokedAt && stored.user.id === claims.sub) {
      await this.revokeFamily(stored.familyId ?? stored.id);
      await reused?.(stored.user, stored.familyId ?? stored.id);
    }
    if (!stored || stored.revokedAt || stored.expiresAt.getTime() <= this.now() || stored.user.id !== claims.sub) {
      throw new UnauthenticatedError('The refresh token is invalid, expired or already used', ErrorCode.InvalidCredentials);
    }
    // A password or role change since the chain started ends it (a deleted key's chain is already gone).
    if ((stored.credentialVersion ?? 0) !== (stored.user.credentialVersion ?? 0)) throw credentialRevoked();
    const apiKey = stored.apiKeyId ? await em.findOne(ApiKeySchema, { id: stored.apiKeyId }) : undefined;
    if (stored.apiKeyId && !apiKey) throw credentialRevoked();
    // Consume it atomically: of two concurrent refreshes with one token, only one wins.
    const consumed = await this.storage.execute<{ id: string }>(
      'update refresh_tokens set revoked_at = ? where id = ? and revoked_at is null returning id',
      [new Date(this.now()), stored.id],
    );
    if (consumed.length === 0) {
      await this.revokeFamily(stored.familyId ?? stored.id);
      await reused?.(stored.user, stored.familyId ?? stored.id);
      throw new UnauthenticatedError('The refresh token is already used', ErrorCode.InvalidCredentials);
    }
    return this.issueTokens(stored.user, stored.permission as ApiPermission, apiKey ?? undefined, stored.familyId ?? stored.id);
  }

  /** Revokes one rotation chain: its unused refresh tokens, and (through `family_revoked_at`) its access tokens. */
  private async revokeFamily(familyId: string): Promise<void> {
    const now = new Date(this.now());
    await this.storage.execute(
      'update refresh_tokens set revoked_at = coalesce(revoked_at, ?), family_revoked_at = coalesce(family_revoked_at, ?) where family_id = ? or id = ?',
      [now, now, familyId, familyId],
    );
  }

  /** Creates a key for `owner`; the clear key is returned once and only its hash is kept. */
  async createApiKey(
    owner: User,
    permission: ApiKeyPermission,
    description: string,
    limits: { requestsPerSecond?: number | null; posesPerSecond?: number | null } = {},
    /** Runs in the creation's transaction (the API's audit entry). */
    inTransaction?: (tx: EntityManager, apiKey: ApiKey) => Promise<void>,
  ): Promise<{ apiKey: ApiKey; key: string }> {
    const key = API_KEY_PREFIX + randomBytes(24).toString('base64url');
    const apiKey = await this.storage.em().transactional(async (em) => {
      if ((await em.count(ApiKeySchema, { user: owner.id })) >= this.maxKeysPerUser) {
        throw new ValidationError([
          { field: 'user_id', message: `A user holds at most ${this.maxKeysPerUser} API keys (MAX_API_KEYS_PER_USER); delete one first` },
        ]);
      }
      const apiKey = em.create(ApiKeySchema, {
        id: randomUUID(),
        organization: owner.organization,
        user: em.getReference(UserSchema, owner.id),
        keyHash: sha256(key),
        keyHint: `${key.slice(0, 7)}…${key.slice(-4)}`,
        permission,
        description,
        createdAt: new Date(this.now()),
        requestsPerSecond: limits.requestsPerSecond ?? null,
        posesPerSecond: limits.posesPerSecond ?? null,
      });
      await em.flush();
      await inTransaction?.(em, apiKey);
      return apiKey;
    });
    return { apiKey, key };
  }
}

/** Which of these refresh-token families were revoked as a whole (read from storage, never from a cache). */
export async function revokedFamilies(storage: Storage, familyIds: readonly string[]): Promise<Set<string>> {
  if (familyIds.length === 0) return new Set();
  const rows = await storage.execute<{ family: string }>(
    `select distinct coalesce(family_id, id) as family from refresh_tokens
      where (family_id = any(?::uuid[]) or id = any(?::uuid[])) and family_revoked_at is not null`,
    [pgArray(familyIds), pgArray(familyIds)],
  );
  return new Set(rows.map((row) => String(row.family)));
}
