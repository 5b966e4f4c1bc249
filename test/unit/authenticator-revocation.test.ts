import { describe, expect, it } from 'vitest';
import { RequestAuthenticator } from '../../gateway/auth/authenticator.js';
import type { CredentialService } from '../../gateway/auth/credential-service.js';
import { sha256 } from '../../gateway/auth/credential-service.js';
import type { TokenService } from '../../gateway/auth/token-service.js';
import type { RouteDefinition } from '../../gateway/http/route.js';
import { LocalBus } from '../../shared/bus/local-bus.js';
import type { Channels } from '../../gateway/bus-channels.js';
import { ApiKeySchema } from '../../shared/storage/entities/index.js';
import type { Storage } from '../../shared/storage/index.js';

const ROUTE = { method: 'GET', path: '/x', auth: 'authenticated' } as unknown as RouteDefinition;
const KEY = 'fc_the-key';
const user = { id: 'u1', email: 'u1@example.com', organization: { id: 'o1' }, role: 'user', platformAdmin: false, credentialVersion: 0 };
const keyRow = { id: 'k1', keyHash: sha256(KEY), user, permission: 'read-only', requestsPerSecond: null, posesPerSecond: null };

/**
 * A database whose key reads can be held: each read of the key returns a promise the test resolves, so a read
 * that started before a revocation can be made to finish after it, as on a busy server.
 */
function slowStorage() {
  let deleted = false;
  const held: (() => void)[] = [];
  let holdNext = false;
  const findOne = async (entity: unknown) => {
    const row = entity === ApiKeySchema ? (deleted ? null : keyRow) : user;
    if (entity === ApiKeySchema && holdNext) {
      holdNext = false;
      await new Promise<void>((resolve) => held.push(resolve));
    }
    return row;
  };
  const storage = { em: () => ({ findOne }) } as unknown as Storage;
  return {
    storage,
    holdNextKeyRead: () => (holdNext = true),
    releaseHeld: () => {
      for (const release of held.splice(0)) release();
    },
    deleteKey: () => (deleted = true),
  };
}

function authenticatorOver(storage: Storage) {
  const bus = new LocalBus<Channels>();
  const credentials = { markApiKeyUsed: async () => undefined } as unknown as CredentialService;
  const authenticator = new RequestAuthenticator({} as TokenService, storage, bus, credentials, 60_000);
  return { authenticator, bus };
}

describe('revocation generations (issue 28 item 1)', () => {
  it('a key read that started before the revocation does not re-fill the cache after it', async () => {
    const db = slowStorage();
    const { authenticator } = authenticatorOver(db.storage);
    await authenticator.start();
    db.holdNextKeyRead();
    // The read of the key starts while the row still exists ...
    const inFlight = authenticator.authenticate({ 'x-api-key': KEY }, ROUTE).then(
      () => 'accepted',
      () => 'refused',
    );
    await new Promise((resolve) => setImmediate(resolve));
    // ... the DELETE commits and its announcement drops the (empty) cache entry ...
    db.deleteKey();
    await authenticator.invalidate({ apiKeyHash: keyRow.keyHash, apiKeyId: keyRow.id, userId: user.id, revoke: true });
    // ... and only then does the old read return the row.
    db.releaseHeld();
    await inFlight;
    // Every later request is refused: nothing remembered the row read before the revocation.
    await expect(authenticator.authenticate({ 'x-api-key': KEY }, ROUTE)).rejects.toMatchObject({ status: 401 });
  });

  it('a generation moves with each revocation of the user or key, and not with another user’s', async () => {
    const db = slowStorage();
    const { authenticator } = authenticatorOver(db.storage);
    await authenticator.start();
    const principal = await authenticator.authenticate({ 'x-api-key': KEY }, ROUTE);
    const mark = authenticator.revocationMark();
    await authenticator.invalidate({ userId: 'someone-else' });
    expect(authenticator.revokedSince(principal, mark)).toBe(false);
    await authenticator.invalidate({ apiKeyId: keyRow.id });
    expect(authenticator.revokedSince(principal, mark)).toBe(true);
    const later = authenticator.revocationMark();
    await authenticator.invalidate({ userId: user.id });
    expect(authenticator.revokedSince(principal, later)).toBe(true);
  });
});
