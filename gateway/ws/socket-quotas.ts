import { RateLimitedError } from '../../shared/errors.js';
import type { Principal } from '../auth/principal.js';

export interface SocketQuotaLimits {
  perUser: number;
  perCredential: number;
  perAddress: number;
}

/** The credential a socket counts against: the API key behind it, else the user's password sessions (as rate-limit.ts). */
const credentialOf = (principal: Principal) => (principal.apiKeyId ? `key:${principal.apiKeyId}` : `user:${principal.userId}`);

/**
 * Authenticated sockets held on this gateway, per user, per credential and per remote address. A socket takes
 * a slot of each when it authenticates (on the upgrade, or with its `auth` message) and gives them back when it
 * closes; past any of them it is refused with 429, so one user (or one leaked key, or one address) cannot hold
 * an unbounded number of sockets, each with its own send buffer.
 */
export class SocketQuotas {
  private readonly held = new Map<string, number>();

  constructor(private readonly limits: SocketQuotaLimits) {}

  /** Takes a slot of each quota, or throws 429 naming the full one; returns the function giving them back (once). */
  take(principal: Principal, address: string): () => void {
    const slots: [string, number, string][] = [
      [`user|${principal.userId}`, this.limits.perUser, 'your user'],
      [`credential|${credentialOf(principal)}`, this.limits.perCredential, 'this credential'],
      [`address|${address}`, this.limits.perAddress, 'your address'],
    ];
    for (const [key, limit, whose] of slots) {
      if ((this.held.get(key) ?? 0) >= limit)
        throw new RateLimitedError(`Too many open sockets for ${whose} (at most ${limit}): close some first`);
    }
    for (const [key] of slots) this.held.set(key, (this.held.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const [key] of slots) {
        const count = (this.held.get(key) ?? 1) - 1;
        if (count > 0) this.held.set(key, count);
        else this.held.delete(key);
      }
    };
  }
}
