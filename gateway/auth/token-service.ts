import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { SignJWT, errors as joseErrors, jwtVerify } from 'jose';
import type { Config } from '../../shared/config.js';
import { ErrorCode, UnauthenticatedError } from '../../shared/errors.js';
import type { Role } from '../../shared/storage/entities/user.entity.js';
import type { ApiPermission } from './principal.js';

/** The claims the official client decodes (`email`, `organization_uuid`, `role`, `api_permission`, `exp`), plus `sub` and `iat`. */
export interface AccessClaims {
  sub: string;
  email: string;
  organization_uuid: string;
  role: Role;
  api_permission: ApiPermission;
  platform_admin?: boolean;
  /** The user's credential version when minted: a password or role change since refuses the token. */
  cv?: number;
  /** The API key this token was minted from: deleting the key refuses the token. */
  key_id?: string;
  /** The refresh-token family (rotation chain) this token belongs to: revoking the family refuses the token. */
  fid?: string;
  /**
   * Minted by the operators' CLI with the signing key, not by sign-in: names its user by `email` (`sub` is
   * "operator"), lives 5 minutes at most (see Authenticator.operatorUser).
   */
  operator?: true;
}

/**
 * The signing key: JWT_SECRET when set, otherwise a random key generated on first start and kept in
 * `<DATA_DIR>/jwt-secret` (mode 0600) so tokens survive a restart. Several gateways must share JWT_SECRET.
 */
export function loadJwtSecret(config: Config): Uint8Array {
  if (config.JWT_SECRET) return new TextEncoder().encode(config.JWT_SECRET);
  const file = join(config.DATA_DIR, 'jwt-secret');
  if (!existsSync(file)) {
    mkdirSync(config.DATA_DIR, { recursive: true });
    writeFileSync(file, randomBytes(48).toString('base64url'), { mode: 0o600, flag: 'wx' });
  }
  chmodSync(file, 0o600);
  return new TextEncoder().encode(readFileSync(file, 'utf8').trim());
}

const ISSUER = 'floorcast';

type VerifiedClaims = Readonly<AccessClaims & { exp: number; iat: number }>;

/**
 * Tokens whose signature was already checked. An HMAC verification per request is measurable when apps upload
 * thousands of batches a second; bounded, oldest first out, so a flood of distinct tokens cannot grow it.
 */
const VERIFIED_CACHE_SIZE = 10_000;

export class TokenService {
  private readonly verified = new Map<string, VerifiedClaims>();

  constructor(
    private readonly secret: Uint8Array,
    readonly ttlSeconds: number,
    private readonly now: () => number = Date.now,
  ) {}

  async sign(claims: AccessClaims): Promise<string> {
    const issuedAt = Math.floor(this.now() / 1000);
    return new SignJWT({ ...claims })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer(ISSUER)
      .setSubject(claims.sub)
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + this.ttlSeconds)
      .sign(this.secret);
  }

  /** Verifies signature, algorithm, issuer and expiry; 401 `token_expired` or `unauthenticated` otherwise. */
  async verify(token: string): Promise<VerifiedClaims> {
    // A token's signature never changes its verdict, so it is checked once; expiry is checked on every use.
    const known = this.verified.get(token);
    if (known) {
      if (known.exp > Math.floor(this.now() / 1000)) return known;
      this.verified.delete(token);
      throw new UnauthenticatedError('The access token has expired', ErrorCode.TokenExpired);
    }
    const claims = await this.verifySignature(token);
    if (this.verified.size >= VERIFIED_CACHE_SIZE) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(token, claims);
    return claims;
  }

  private async verifySignature(token: string): Promise<VerifiedClaims> {
    try {
      const { payload } = await jwtVerify(token, this.secret, {
        algorithms: ['HS256'],
        issuer: ISSUER,
        currentDate: new Date(this.now()),
      });
      if (typeof payload.sub !== 'string' || typeof payload.organization_uuid !== 'string') {
        throw new UnauthenticatedError('The access token is malformed');
      }
      return Object.freeze(payload) as unknown as VerifiedClaims;
    } catch (error) {
      if (error instanceof joseErrors.JWTExpired) throw new UnauthenticatedError('The access token has expired', ErrorCode.TokenExpired);
      if (error instanceof UnauthenticatedError) throw error;
      throw new UnauthenticatedError('The access token is invalid');
    }
  }

  /** Claims without verification, for a refresh whose access token may have expired (the refresh token is what is checked). */
  async verifyIgnoringExpiry(token: string): Promise<AccessClaims> {
    try {
      const { payload } = await jwtVerify(token, this.secret, { algorithms: ['HS256'], issuer: ISSUER, currentDate: new Date(0) });
      return payload as unknown as AccessClaims;
    } catch {
      throw new UnauthenticatedError('The access token is invalid');
    }
  }
}
