import type { AuthInvalidation, Bus } from '../bus-channels.js';
import { ForbiddenError, UnauthenticatedError, UnavailableError } from '../../shared/errors.js';
import type { Storage } from '../../shared/storage/index.js';
import { ApiKeySchema, UserSchema, type ApiKey } from '../../shared/storage/entities/index.js';
import type { Authenticator } from '../http/http-server.js';
import type { RouteDefinition } from '../http/route.js';
import { credentialRevoked, invalidCredentials, revokedFamilies, sha256, type CredentialService } from './credential-service.js';
import { can } from './permissions.js';
import type { ApiPermission, Principal } from './principal.js';
import type { TokenService } from './token-service.js';

/** A write is any route that changes state; read-only credentials may not call it. */
export const isWriteRoute = (route: RouteDefinition): boolean => route.write ?? route.method !== 'GET';

/**
 * Decides whether an authenticated caller may call a route: credential permission first (read-only keys
 * never write, positioning keys only upload positions), then the role table.
 */
export function authorize(principal: Principal, route: RouteDefinition): void {
  if (principal.permission === 'positioning' && !route.allowPositioningKey) {
    throw new ForbiddenError('This credential may only upload positions');
  }
  if (principal.permission === 'read-only' && isWriteRoute(route)) throw new ForbiddenError('This credential is read-only');
  if (route.action && !can(principal.role, route.action)) throw new ForbiddenError(`Your role (${principal.role}) may not do this`);
}

interface CachedUser {
  principal: Omit<Principal, 'permission' | 'via'> & { credentialVersion: number };
  expiresAt: number;
}

interface CachedApiKey {
  id: string;
  userId: string;
  permission: ApiPermission;
  email: string;
  limits: NonNullable<Principal['limits']>;
  expiresAt: number;
}

/** The longest an operator token (minted by the admin CLI with the signing key) may be valid. */
export const OPERATOR_TOKEN_MAX_SECONDS = 300;

/** How many revoked users and keys the generation table remembers before it forgets them all at once. */
const MAX_TRACKED_REVOCATIONS = 10_000;
/** Reads retried when a revocation of what they read arrived meanwhile, before the request is refused (503). */
const MAX_STALE_READS = 3;

/**
 * Turns `Authorization: Bearer <JWT>`, or `X-API-KEY` (with or without `X-API-EMAIL`), into a principal.
 * A token must still match the credential it was minted from: the user's credential version, and its API
 * key if it came from one. Users and keys are cached for a few seconds to spare a database read per request;
 * a change (user deleted, password or role changed, key revoked) is announced on the bus and drops the cached
 * copy on every gateway (the live feeds close a revoked credential's sockets). The short TTL is the backstop.
 */
export class RequestAuthenticator {
  private readonly users = new Map<string, CachedUser>();
  /** Keyed by the key's hash (direct use) and, for tokens minted from a key, by `id:<key id>`. */
  private readonly apiKeys = new Map<string, CachedApiKey | { missing: true; expiresAt: number }>();
  /** Refresh-token families known to be live, until the time given (a revoked family is never cached). */
  private readonly liveFamilies = new Map<string, number>();
  /**
   * Revocation generations: every `forget()` takes the next number of `revocations`, and records it against
   * the user, the key id and the key hash it names. A lookup notes the number before it reads; what it read
   * is remembered only when none of what it found was revoked since (else it reads again), so a read that
   * started before a revocation never re-fills the cache after it. Past MAX_TRACKED_REVOCATIONS the table is
   * emptied and `floor` raised instead: every read started before then counts as stale.
   */
  private revocations = 0;
  private floor = 0;
  private readonly revokedAt = new Map<string, number>();

  constructor(
    private readonly tokens: TokenService,
    private readonly storage: Storage,
    private readonly bus: Bus,
    private readonly credentials: CredentialService,
    private readonly cacheMs = 5000,
    private readonly now: () => number = Date.now,
  ) {}

  async start(): Promise<void> {
    await this.bus.subscribe('auth:invalidate', (change) => this.forget(change));
    // A revocation announced while this node's bus was disconnected is lost: start from the database again.
    this.bus.onResync(() => {
      this.users.clear();
      this.apiKeys.clear();
      this.liveFamilies.clear();
      this.floor = ++this.revocations;
      this.revokedAt.clear();
    });
  }

  /** Announces a change to every gateway (this one included). */
  async invalidate(change: AuthInvalidation): Promise<void> {
    this.forget(change);
    // Only defined fields travel, so every bus encoding reads the same message.
    await this.bus.publish('auth:invalidate', Object.fromEntries(Object.entries(change).filter(([, value]) => value !== undefined)));
  }

  /**
   * The current revocation generation. Capture it before an operation that reads a credential and ends
   * later (a socket upgrade), then ask `revokedSince(principal, mark)` before trusting the result.
   */
  revocationMark(): number {
    return this.revocations;
  }

  /** Whether the principal's user, API key or token family was revoked (or the bus resynced) after `mark` was captured. */
  revokedSince(principal: Pick<Principal, 'userId' | 'apiKeyId' | 'tokenFamilyId'>, mark: number): boolean {
    return this.staleSince(mark, [
      `user:${principal.userId}`,
      principal.apiKeyId && `key:${principal.apiKeyId}`,
      principal.tokenFamilyId && `family:${principal.tokenFamilyId}`,
    ]);
  }

  private staleSince(mark: number, names: (string | undefined | false)[]): boolean {
    if (mark < this.floor) return true;
    return names.some((name) => name && (this.revokedAt.get(name) ?? 0) > mark);
  }

  private forget(change: AuthInvalidation): void {
    const generation = ++this.revocations;
    if (this.revokedAt.size > MAX_TRACKED_REVOCATIONS) {
      this.revokedAt.clear();
      this.floor = generation;
    }
    if (change.userId) this.revokedAt.set(`user:${change.userId}`, generation);
    if (change.apiKeyId) this.revokedAt.set(`key:${change.apiKeyId}`, generation);
    if (change.apiKeyHash) this.revokedAt.set(`hash:${change.apiKeyHash}`, generation);
    if (change.tokenFamilyId) {
      this.revokedAt.set(`family:${change.tokenFamilyId}`, generation);
      this.liveFamilies.delete(change.tokenFamilyId);
    }
    if (change.userId) {
      this.users.delete(change.userId);
      for (const [hash, key] of this.apiKeys) if ('userId' in key && key.userId === change.userId) this.apiKeys.delete(hash);
    }
    if (change.apiKeyHash) this.apiKeys.delete(change.apiKeyHash);
    if (change.apiKeyId) {
      this.apiKeys.delete(`id:${change.apiKeyId}`);
      for (const [hash, key] of this.apiKeys) if ('id' in key && key.id === change.apiKeyId) this.apiKeys.delete(hash);
    }
  }

  readonly authenticate: Authenticator = async (headers, route) => {
    const authorization = headers.authorization ?? '';
    let principal: Principal;
    const bearer = /^Bearer\s+(\S+)$/i.exec(authorization);
    if (bearer) {
      const claims = await this.tokens.verify(bearer[1]!);
      const user = claims.operator ? await this.operatorUser(claims) : await this.loadUser(claims.sub);
      if (!user) throw new UnauthenticatedError('The user of this token no longer exists');
      if (!claims.operator && (claims.cv ?? 0) !== user.credentialVersion) throw credentialRevoked();
      if (claims.fid && !(await this.familyLive(claims.fid))) throw credentialRevoked();
      principal = { ...user, permission: claims.api_permission, via: 'jwt', ...(claims.fid ? { tokenFamilyId: claims.fid } : {}) };
      if (claims.key_id) {
        const key = await this.apiKeyById(claims.key_id);
        if (!key) throw credentialRevoked();
        principal.apiKeyId = key.id;
        principal.limits = key.limits;
      }
    } else if (headers['x-api-key']) {
      principal = await this.fromApiKey(headers['x-api-key'], headers['x-api-email']);
    } else {
      throw new UnauthenticatedError('Send Authorization: Bearer <access token>, or X-API-EMAIL and X-API-KEY');
    }
    try {
      authorize(principal, route);
    } catch (error) {
      // The refused caller travels with the refusal, so the HTTP server can audit who was refused.
      throw Object.assign(error as Error, { principal });
    }
    return principal;
  };

  private async loadUser(userId: string): Promise<CachedUser['principal'] | undefined> {
    const cached = this.users.get(userId);
    if (cached && cached.expiresAt > this.now()) return cached.principal;
    const user = await this.freshRead(
      () => this.storage.em().findOne(UserSchema, { id: userId }),
      () => [`user:${userId}`],
    );
    if (!user) {
      this.users.delete(userId);
      return undefined;
    }
    const principal = {
      userId: user.id,
      email: user.email,
      organizationId: (user.organization as { id: string }).id,
      role: user.role,
      platformAdmin: user.platformAdmin,
      credentialVersion: user.credentialVersion ?? 0,
    };
    if (this.users.size > 10_000) this.users.clear();
    this.users.set(userId, { principal, expiresAt: this.now() + this.cacheMs });
    return principal;
  }

  /** Whether the refresh-token family a token belongs to still holds (not revoked for a reused refresh token). */
  private async familyLive(familyId: string): Promise<boolean> {
    if ((this.liveFamilies.get(familyId) ?? 0) > this.now()) return true;
    const revoked = await this.freshRead(
      () => revokedFamilies(this.storage, [familyId]),
      () => [`family:${familyId}`],
    );
    if (revoked.has(familyId)) return false;
    if (this.liveFamilies.size > 10_000) this.liveFamilies.clear();
    this.liveFamilies.set(familyId, this.now() + this.cacheMs);
    return true;
  }

  /**
   * The user an operator token names by e-mail (`npm run admin -- reset-password` while a gateway holds the
   * embedded database): whoever holds the signing key can mint any token already, and this one only names its
   * user by e-mail, as the operator knows it, rather than by id and credential version, which only the database
   * knows. It must be short-lived; read fresh, never cached.
   */
  private async operatorUser(claims: { email: string; iat: number; exp: number }): Promise<CachedUser['principal'] | undefined> {
    if (claims.exp - claims.iat > OPERATOR_TOKEN_MAX_SECONDS) {
      throw new UnauthenticatedError('An operator token may live 5 minutes at most');
    }
    // E-mails are unique per organization: an e-mail that names users in several organizations names nobody here.
    const users = await this.storage.em().find(UserSchema, { email: claims.email.toLowerCase() }, { limit: 2 });
    if (users.length > 1) throw new UnauthenticatedError('This e-mail names users in several organizations: reset through the API');
    const user = users[0];
    if (!user) return undefined;
    return {
      userId: user.id,
      email: user.email,
      organizationId: (user.organization as { id: string }).id,
      role: user.role,
      platformAdmin: user.platformAdmin,
      credentialVersion: user.credentialVersion ?? 0,
    };
  }

  private remember(cacheKey: string, apiKey: ApiKey | null): CachedApiKey | undefined {
    const expiresAt = this.now() + this.cacheMs;
    if (this.apiKeys.size > 10_000) this.apiKeys.clear();
    if (!apiKey) {
      this.apiKeys.set(cacheKey, { missing: true, expiresAt });
      return undefined;
    }
    const entry: CachedApiKey = {
      id: apiKey.id,
      userId: apiKey.user.id,
      permission: apiKey.permission,
      email: apiKey.user.email,
      limits: { requestsPerSecond: apiKey.requestsPerSecond ?? null, posesPerSecond: apiKey.posesPerSecond ?? null },
      expiresAt,
    };
    this.apiKeys.set(cacheKey, entry);
    return entry;
  }

  /** The key a token was minted from, or undefined once it is deleted. */
  private async apiKeyById(id: string): Promise<CachedApiKey | undefined> {
    const cached = this.apiKeys.get(`id:${id}`);
    if (cached && cached.expiresAt > this.now()) return 'missing' in cached ? undefined : cached;
    const apiKey = await this.freshRead(
      () => this.storage.em().findOne(ApiKeySchema, { id }, { populate: ['user'] }),
      (found) => [`key:${id}`, found && `user:${found.user.id}`, found && `hash:${found.keyHash}`],
    );
    return this.remember(`id:${id}`, apiKey);
  }

  /**
   * Runs `read` until no revocation of what it names (`names` of the result) arrived while it ran, so
   * what it returns may be cached. A read that keeps losing the race is refused (503) rather than trusted.
   */
  private async freshRead<T>(read: () => Promise<T>, names: (found: T) => (string | undefined | false | null)[]): Promise<T> {
    for (let attempt = 0; attempt < MAX_STALE_READS; attempt += 1) {
      const mark = this.revocations;
      const found = await read();
      if (
        !this.staleSince(
          mark,
          names(found).map((name) => name ?? undefined),
        )
      )
        return found;
    }
    throw new UnavailableError('Credentials are changing; try again shortly');
  }

  private async fromApiKey(key: string, email: string | undefined): Promise<Principal> {
    const hash = sha256(key);
    let entry = this.apiKeys.get(hash);
    if (!entry || entry.expiresAt <= this.now() || 'missing' in entry) {
      const apiKey = await this.freshRead(
        async () => {
          const found = await this.storage.em().findOne(ApiKeySchema, { keyHash: hash }, { populate: ['user'] });
          if (found) await this.credentials.markApiKeyUsed(hash);
          return found;
        },
        (found) => [`hash:${hash}`, found && `key:${found.id}`, found && `user:${found.user.id}`],
      );
      if (!apiKey) throw invalidCredentials();
      entry = this.remember(hash, apiKey)!;
    }
    if (email !== undefined && email.trim().toLowerCase() !== entry.email) throw invalidCredentials();
    const user = await this.loadUser(entry.userId);
    if (!user) throw invalidCredentials();
    return { ...user, permission: entry.permission, via: 'apikey', apiKeyId: entry.id, limits: entry.limits };
  }
}
