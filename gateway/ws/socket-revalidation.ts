import type { Logger } from '../../shared/logger.js';
import type { Storage } from '../../shared/storage/index.js';
import type { Principal } from '../auth/principal.js';
import { revokedAmong } from './credential-check.js';
import { CREDENTIAL_REVOKED, TOKEN_EXPIRED, type Connection } from './ws-connection.js';

/** The longest delay a Node timer takes (about 24.8 days); a later expiry is re-armed when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Revocations remembered per key or user: longer than any authentication in flight, or cache entry, lasts. */
const MAX_REMEMBERED = 10_000;

export interface SocketRevalidationOptions {
  /** Every authenticated socket is checked against storage this often. */
  intervalMs: number;
  /** How long a revocation marks its key or user as suspect: a socket of theirs authenticated meanwhile is checked. */
  suspectMs: number;
}

/**
 * Keeps authenticated sockets true to their credential after the fact, whatever the caches and the bus did:
 * - a socket whose credential was revoked while it authenticated (or was authenticated from a cache entry
 *   filled by a read that started before the revocation) is checked against storage as it opens, because the
 *   revocation marked its key or user suspect for a while;
 * - every socket is checked periodically (`intervalMs`), and all at once after a bus resync (a revocation
 *   announced while this gateway was disconnected is lost);
 * - a socket authenticated with a token is closed when the token expires.
 * The revocation feed (live-feeds.ts) still closes the sockets it knows of at once; this closes the rest.
 */
export class SocketRevalidation {
  private readonly suspects = new Map<string, number>();
  private timer?: NodeJS.Timeout;
  private sweeping?: Promise<void>;

  constructor(
    private readonly storage: Storage,
    private readonly connections: () => Iterable<Connection>,
    private readonly logger: Logger,
    private readonly options: SocketRevalidationOptions,
    private readonly now: () => number = Date.now,
  ) {}

  start(): void {
    if (this.timer || this.options.intervalMs <= 0) return;
    this.timer = setInterval(() => void this.sweep(), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** A revocation seen on the bus: sockets of this key, user or token family authenticated from now on, for a while, are checked. */
  revoked(change: { apiKeyId?: string; userId?: string; tokenFamilyId?: string }): void {
    const until = this.now() + this.options.suspectMs;
    if (this.suspects.size >= MAX_REMEMBERED) this.forgetExpired();
    if (this.suspects.size >= MAX_REMEMBERED) this.suspects.delete(this.suspects.keys().next().value!);
    if (change.apiKeyId) this.suspects.set(`key:${change.apiKeyId}`, until);
    if (change.userId) this.suspects.set(`user:${change.userId}`, until);
    if (change.tokenFamilyId) this.suspects.set(`family:${change.tokenFamilyId}`, until);
  }

  /**
   * A socket has just been authenticated: checked against storage now if its credential was revoked lately,
   * and set to close when its token expires.
   */
  authenticated(connection: Connection, expiresAt: number | undefined): void {
    const principal = connection.principal!;
    if (this.suspect(principal)) void this.check([connection]);
    if (expiresAt !== undefined) this.expireAt(connection, expiresAt);
  }

  /** Checks every authenticated socket (the periodic sweep, and a bus resync). */
  sweep(): Promise<void> {
    this.sweeping ??= this.check([...this.connections()].filter((connection) => connection.principal && !connection.closed)).finally(
      () => (this.sweeping = undefined),
    );
    return this.sweeping;
  }

  /** Closes (4401) those of these sockets whose credential no longer holds in storage. */
  async check(connections: readonly Connection[]): Promise<void> {
    if (connections.length === 0) return;
    let revoked: Set<Principal>;
    try {
      revoked = await revokedAmong(
        this.storage,
        connections.map((connection) => connection.principal!),
      );
    } catch (error) {
      // Storage out of reach: checked again at the next sweep.
      this.logger.warn({ err: error, sockets: connections.length }, 're-validating sockets failed; retried at the next sweep');
      return;
    }
    for (const connection of connections) {
      if (revoked.has(connection.principal!)) connection.close(CREDENTIAL_REVOKED.code, CREDENTIAL_REVOKED.reason);
    }
  }

  private suspect(principal: Principal): boolean {
    const now = this.now();
    const marked = (key: string) => (this.suspects.get(key) ?? 0) > now;
    return (
      marked(`user:${principal.userId}`) ||
      (principal.apiKeyId !== undefined && marked(`key:${principal.apiKeyId}`)) ||
      (principal.tokenFamilyId !== undefined && marked(`family:${principal.tokenFamilyId}`))
    );
  }

  private forgetExpired(): void {
    const now = this.now();
    for (const [key, until] of this.suspects) if (until <= now) this.suspects.delete(key);
  }

  private expireAt(connection: Connection, expiresAt: number): void {
    clearTimeout(connection.expiryTimer);
    const delay = expiresAt - this.now();
    if (delay <= 0) return connection.close(TOKEN_EXPIRED.code, TOKEN_EXPIRED.reason);
    connection.expiryTimer = setTimeout(() => this.expireAt(connection, expiresAt), Math.min(delay, MAX_TIMER_MS));
    connection.expiryTimer.unref();
  }
}
