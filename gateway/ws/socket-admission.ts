import type { Principal } from '../auth/principal.js';
import type { RouteDefinition } from '../http/route.js';
import type { RateLimits } from '../http/rate-limit.js';
import { SocketQuotas } from './socket-quotas.js';
import type { WsOptions } from './ws-connection.js';

/** A pseudo-route for authenticating sockets: any credential may connect; each operation checks its own right. */
export const SOCKET_ROUTE = {
  method: 'GET',
  path: '/api/v1/ws',
  summary: '',
  auth: 'authenticated',
  allowPositioningKey: true,
  handler: () => ({}),
} as RouteDefinition;

/**
 * Admission of sockets, the one job of this file: the slots an unauthenticated socket holds per remote address
 * (taken on the upgrade, given back when it authenticates or closes), and what every authentication passes
 * (the request budget, then the per user, credential and address quotas of socket-quotas.ts).
 */
export class SocketAdmission {
  /** Unauthenticated sockets per remote address (entries go when they reach zero). */
  private readonly unauthenticated = new Map<string, number>();
  private readonly quotas: SocketQuotas;

  constructor(
    private readonly rateLimits: Pick<RateLimits, 'consume'> | undefined,
    private readonly options: Pick<
      WsOptions,
      'maxUnauthenticatedPerAddress' | 'maxSocketsPerUser' | 'maxSocketsPerCredential' | 'maxSocketsPerAddress'
    >,
  ) {
    this.quotas = new SocketQuotas({
      perUser: options.maxSocketsPerUser,
      perCredential: options.maxSocketsPerCredential,
      perAddress: options.maxSocketsPerAddress,
    });
  }

  /**
   * What every authentication of a socket passes (the upgrade's, or an `auth` message's): it counts against
   * the credential's request budget, and takes a slot of its user's, credential's and address's socket quotas.
   * Returns the function giving the slots back; throws 429 past either.
   */
  async admit(principal: Principal, address: string): Promise<() => void> {
    await this.rateLimits?.consume(principal);
    return this.quotas.take(principal, address);
  }

  /** Takes a slot of the address's unauthenticated quota; false when it is full. */
  reserveUnauthenticated(address: string): boolean {
    if ((this.unauthenticated.get(address) ?? 0) >= this.options.maxUnauthenticatedPerAddress) return false;
    this.unauthenticated.set(address, (this.unauthenticated.get(address) ?? 0) + 1);
    return true;
  }

  releaseUnauthenticated(address: string): void {
    const count = (this.unauthenticated.get(address) ?? 1) - 1;
    if (count > 0) this.unauthenticated.set(address, count);
    else this.unauthenticated.delete(address);
  }
}
