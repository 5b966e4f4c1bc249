import type { HttpRequest, HttpResponse, us_socket_context_t } from 'uWebSockets.js';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../../gateway/auth/principal.js';
import { SocketAdmission } from '../../gateway/ws/socket-admission.js';
import { WsUpgrade, type Corkable } from '../../gateway/ws/ws-upgrade.js';
import { createLogger } from '../../shared/logger.js';

const principal = { userId: 'u1', organizationId: 'o1', role: 'user', permission: 'read-write' } as Principal;
const limits = { maxUnauthenticatedPerAddress: 4, maxSocketsPerUser: 8, maxSocketsPerCredential: 8, maxSocketsPerAddress: 8 };

/** Records what the upgrade did, and inside which cork. */
function fakeUpgrade() {
  const log: string[] = [];
  let corkedBy: string | undefined;
  const corkOf =
    (name: string) =>
    (callback: () => void): unknown => {
      log.push(`cork:${name}`);
      corkedBy = name;
      try {
        callback();
      } finally {
        corkedBy = undefined;
      }
      return undefined;
    };
  const res = {
    onAborted: () => res,
    getRemoteAddressAsText: () => new TextEncoder().encode('127.0.0.1').buffer,
    cork: corkOf('res'),
    upgrade: () => log.push(`upgrade inside ${corkedBy ?? 'no cork'}`),
    writeStatus: () => res,
    writeHeader: () => res,
    end: () => log.push('refused'),
  } as unknown as HttpResponse;
  const headers: Record<string, string> = { authorization: 'Bearer t', 'sec-websocket-key': 'k' };
  const req = {
    forEach: (visit: (name: string, value: string) => void) => {
      for (const [name, value] of Object.entries(headers)) visit(name, value);
    },
    getQuery: () => '',
  } as unknown as HttpRequest;
  return { res, req, log, corkOf };
}

function upgradeWith(corker: Corkable | undefined) {
  // Authentication resolves later, as it does whenever it waits for storage or Redis.
  const authenticator = { authenticate: () => new Promise<Principal>((resolve) => setTimeout(() => resolve(principal), 1)) };
  return new WsUpgrade({ logger: createLogger('silent'), authenticator }, new SocketAdmission(undefined, limits), limits, () => corker);
}

const settled = () => new Promise((resolve) => setTimeout(resolve, 20));

/**
 * uWS 20.30's `HttpResponse::cork` reads the HTTP state of its socket after the callback; an upgrade in that
 * callback may have put a WebSocket in the same memory, and uWS then sometimes shut the new socket down (a 1006
 * on the client right after its first frame). An upgrade that completes after authentication must not run there.
 */
describe('a WebSocket upgrade completed after its authentication', () => {
  it('runs inside another open socket’s cork, never inside the response’s own', async () => {
    const { res, req, log, corkOf } = fakeUpgrade();
    upgradeWith({ cork: corkOf('other socket') }).upgrade(res, req, {} as us_socket_context_t);
    await settled();
    expect(log).toEqual(['cork:other socket', 'upgrade inside other socket']);
  });

  it('runs uncorked when no other socket is open', async () => {
    const { res, req, log } = fakeUpgrade();
    upgradeWith(undefined).upgrade(res, req, {} as us_socket_context_t);
    await settled();
    expect(log).toEqual(['upgrade inside no cork']);
  });
});
