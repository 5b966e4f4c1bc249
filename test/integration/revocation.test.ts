import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestAuthenticator } from '../../gateway/auth/authenticator.js';
import type { RouteDefinition } from '../../gateway/http/route.js';
import type { Bus } from '../../gateway/bus-channels.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser, login } from '../../testkit/identity.js';
import { driverLabel, serverDatabaseUrl, serverRedisUrl } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';
import { ApiKeySchema } from '../../shared/storage/entities/index.js';

const REVOKED = { code: 4401, reason: 'credential revoked' };

/** Issue 14 item 3: revoking a credential reaches the tokens, refresh chains and open sockets derived from it. */
describe(`credential revocation (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  const sockets: TestSocket[] = [];
  const open = async (baseUrl: string, headers: Record<string, string>) => {
    const socket = await TestSocket.open(baseUrl, { headers });
    sockets.push(socket);
    await socket.next((frame) => frame.op === 'authenticated');
    return socket;
  };
  const closedWith = async (socket: TestSocket) => {
    await socket.closed();
    // A client error (a 1006) shows up in the mismatch.
    return { code: socket.closeCode, reason: socket.closeReason, ...(socket.error && { error: socket.error.message }) };
  };

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
  });
  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await running?.stop();
  });

  /** A key of a fresh user, and the token pair minted from it. */
  async function keySession(permission = 'read-write') {
    const owner = await createUser(admin, 'user');
    const key = (await owner.client.post('/api/v1/auth/apikeys', { permission })).body;
    const tokens = (await running.client.post('/api/v1/auth/access_tokens', undefined, { 'x-api-key': key.apikey })).body;
    return { owner, key, tokens };
  }

  it('deleting an API key refuses the tokens minted from it and their refresh chain, and closes their sockets', async () => {
    const { owner, key, tokens } = await keySession();
    const viaToken = running.client.withToken(tokens.access_token);
    expect((await viaToken.get('/api/v1/organizations/current_organization')).status).toBe(200); // cached now
    const tokenSocket = await open(running.baseUrl, { authorization: `Bearer ${tokens.access_token}` });
    const keySocket = await open(running.baseUrl, { 'x-api-key': key.apikey });
    // A socket of the same user on another credential stays open.
    const passwordSocket = await open(running.baseUrl, {
      authorization: `Bearer ${(await login(running.client, owner.email, owner.password)).access_token}`,
    });

    expect((await owner.client.delete(`/api/v1/auth/apikeys/${key.id}`)).status).toBe(204);

    const refused = await viaToken.get('/api/v1/organizations/current_organization');
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('invalid_credentials');
    expect((await running.client.post('/api/v1/auth/refresh_access_tokens', tokens)).status).toBe(401);
    expect(await closedWith(tokenSocket)).toEqual(REVOKED);
    expect(await closedWith(keySocket)).toEqual(REVOKED);
    expect((await passwordSocket.request({ op: 'ping' })).op).toBe('pong');
    expect(passwordSocket.closeCode).toBeUndefined();
  });

  it('a refresh chain started from a key stays tied to it: the refreshed token dies with the key too', async () => {
    const { owner, key, tokens } = await keySession('read-only');
    const refreshed = (await running.client.post('/api/v1/auth/refresh_access_tokens', tokens)).body;
    const viaRefreshed = running.client.withToken(refreshed.access_token);
    expect((await viaRefreshed.get('/api/v1/organizations/current_organization')).status).toBe(200);
    await owner.client.delete(`/api/v1/auth/apikeys/${key.id}`);
    expect((await viaRefreshed.get('/api/v1/organizations/current_organization')).status).toBe(401);
    expect((await running.client.post('/api/v1/auth/refresh_access_tokens', refreshed)).status).toBe(401);
  });

  it('a password change refuses the old tokens and refresh tokens and closes the old sockets; the new password works', async () => {
    const user = await createUser(admin, 'user');
    const old = await login(running.client, user.email, user.password);
    const oldClient = running.client.withToken(old.access_token);
    expect((await oldClient.get('/api/v1/organizations/current_organization')).status).toBe(200);
    const socket = await open(running.baseUrl, { authorization: `Bearer ${old.access_token}` });

    expect((await admin.put(`/api/v1/users/${user.user.id}`, { password: 'a-brand-new-password' })).status).toBe(200);

    expect((await oldClient.get('/api/v1/organizations/current_organization')).status).toBe(401);
    expect((await running.client.post('/api/v1/auth/refresh_access_tokens', old)).status).toBe(401);
    expect(await closedWith(socket)).toEqual(REVOKED);
    const fresh = await login(running.client, user.email, 'a-brand-new-password');
    expect((await running.client.withToken(fresh.access_token).get('/api/v1/organizations/current_organization')).status).toBe(200);
    expect((await running.client.post('/api/v1/auth/refresh_access_tokens', fresh)).status).toBe(200);
  });

  it('a role change applies to existing tokens at once and closes the sockets opened under the old role', async () => {
    const manager = await createUser(admin, 'user_manager');
    const token = (await login(running.client, manager.email, manager.password)).access_token;
    const socket = await open(running.baseUrl, { authorization: `Bearer ${token}` });
    expect((await manager.client.get('/api/v1/users')).status).toBe(200);

    expect((await admin.put(`/api/v1/users/${manager.user.id}`, { role: 'user' })).status).toBe(200);

    expect((await manager.client.get('/api/v1/users')).status).toBe(403);
    expect(await closedWith(socket)).toEqual(REVOKED);
    const reopened = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    sockets.push(reopened);
    expect(await reopened.next((frame) => frame.op === 'authenticated')).toMatchObject({ role: 'user' });
  });

  it('an update that changes no credential leaves the user’s sockets open', async () => {
    const user = await createUser(admin, 'user');
    const socket = await open(running.baseUrl, {
      authorization: `Bearer ${(await login(running.client, user.email, user.password)).access_token}`,
    });
    expect((await admin.put(`/api/v1/users/${user.user.id}`, { full_name: 'Renamed' })).status).toBe(200);
    expect((await socket.request({ op: 'ping' })).op).toBe('pong');
    expect(socket.closeCode).toBeUndefined();
  });

  it('a change whose announcement never arrived still takes effect once the cache TTL has passed (backstop)', async () => {
    const { tokens, storage, credentials } = running.gateway.services;
    const user = await createUser(admin, 'user');
    const token = (await login(running.client, user.email, user.password)).access_token;
    const deaf: Bus = {
      nodeId: 'deaf',
      kind: 'local',
      publish: async () => undefined,
      subscribe: async () => async () => undefined,
      ping: async () => undefined,
      onResync: () => () => undefined,
      close: async () => undefined,
    };
    let now = Date.now();
    const authenticator = new RequestAuthenticator(tokens, storage, deaf, credentials, 5000, () => now);
    const route = { method: 'GET', path: '/probe', summary: '', auth: 'authenticated', handler: () => ({}) } as RouteDefinition;
    const headers = { authorization: `Bearer ${token}` };
    await expect(authenticator.authenticate(headers, route)).resolves.toMatchObject({ userId: user.user.id });
    // A password change made behind this gateway's back: nothing tells it.
    await storage.execute('update users set credential_version = credential_version + 1 where id = ?', [user.user.id]);
    await expect(authenticator.authenticate(headers, route)).resolves.toMatchObject({ userId: user.user.id });
    now += 5001;
    await expect(authenticator.authenticate(headers, route)).rejects.toMatchObject({ status: 401 });
  });

  it('reusing a refresh token refuses every access token of its chain at once and closes their sockets (issue 28, L6)', async () => {
    const user = await createUser(admin, 'user');
    const first = await login(running.client, user.email, user.password);
    const second = (await running.client.post('/api/v1/auth/refresh_access_tokens', first)).body;
    const viaFirst = running.client.withToken(first.access_token);
    const viaSecond = running.client.withToken(second.access_token);
    // Both cached on this gateway, and each with an open socket.
    expect((await viaFirst.get('/api/v1/organizations/current_organization')).status).toBe(200);
    expect((await viaSecond.get('/api/v1/organizations/current_organization')).status).toBe(200);
    const firstSocket = await open(running.baseUrl, { authorization: `Bearer ${first.access_token}` });
    const secondSocket = await open(running.baseUrl, { authorization: `Bearer ${second.access_token}` });
    // Another sign-in of the same user is a chain of its own: untouched.
    const other = await login(running.client, user.email, user.password);
    const otherSocket = await open(running.baseUrl, { authorization: `Bearer ${other.access_token}` });

    // A stolen copy of the first refresh token is replayed.
    expect((await running.client.post('/api/v1/auth/refresh_access_tokens', first)).status).toBe(401);

    for (const client of [viaFirst, viaSecond]) {
      const refused = await client.get('/api/v1/organizations/current_organization');
      expect(refused.status).toBe(401);
      expect(refused.body.code).toBe('invalid_credentials');
    }
    expect(await closedWith(firstSocket)).toEqual(REVOKED);
    expect(await closedWith(secondSocket)).toEqual(REVOKED);
    // A new socket with a token of the revoked chain is refused too.
    await expect(TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${second.access_token}` } })).rejects.toThrow(/401/);
    expect((await running.client.withToken(other.access_token).get('/api/v1/organizations/current_organization')).status).toBe(200);
    expect((await otherSocket.request({ op: 'ping' })).op).toBe('pong');
  });

  it('a socket of a chain revoked behind this gateway’s back is closed by the periodic re-check (issue 28, L6)', async () => {
    const user = await createUser(admin, 'user');
    const tokens = await login(running.client, user.email, user.password);
    const socket = await open(running.baseUrl, { authorization: `Bearer ${tokens.access_token}` });
    // The chain revoked in storage only, as a replay seen by a gateway whose announcement was lost would leave it.
    await running.gateway.services.storage.execute(
      'update refresh_tokens set revoked_at = now(), family_revoked_at = now() where user_id = ?',
      [user.user.id],
    );
    expect((await socket.request({ op: 'ping' })).op).toBe('pong');
    await running.gateway.services.websockets.revalidation.sweep();
    expect(await closedWith(socket)).toEqual(REVOKED);
  });

  it('deleting a user refuses their refresh tokens and closes their sockets', async () => {
    const doomed = await createUser(admin, 'user');
    const tokens = await login(running.client, doomed.email, doomed.password);
    const socket = await open(running.baseUrl, { authorization: `Bearer ${tokens.access_token}` });
    expect((await admin.delete(`/api/v1/users/${doomed.user.id}`)).status).toBe(204);
    expect(await closedWith(socket)).toEqual(REVOKED);
    expect((await running.client.post('/api/v1/auth/refresh_access_tokens', tokens)).status).toBe(401);
  });
});

describe.runIf(serverDatabaseUrl && serverRedisUrl)(`credential revocation across gateways (${driverLabel})`, () => {
  // One pair of gateways on one database for these tests: each works on keys and users of its own, and the one
  // that slows the second gateway's key reads puts its storage back.
  let first: RunningGateway;
  let second: RunningGateway;
  beforeAll(async () => {
    first = await startTestGateway();
    second = await startTestGateway({}, {}, first.environment);
  });
  afterAll(async () => {
    await second?.gateway.close();
    await first?.stop();
  });

  it('a key deleted on one gateway is refused at once on another that had it cached, and its socket there is closed', async () => {
    const admin = await adminClient(first.client);
    const key = (await admin.post('/api/v1/auth/apikeys', { permission: 'read-write' })).body;
    const tokens = (await second.client.post('/api/v1/auth/access_tokens', undefined, { 'x-api-key': key.apikey })).body;
    const viaKey = second.client.withHeaders({ 'x-api-key': key.apikey });
    const viaToken = second.client.withToken(tokens.access_token);
    expect((await viaKey.get('/api/v1/organizations/current_organization')).status).toBe(200);
    expect((await viaToken.get('/api/v1/organizations/current_organization')).status).toBe(200);
    const socket = await TestSocket.open(second.baseUrl, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    await socket.next((frame) => frame.op === 'authenticated');

    expect((await admin.delete(`/api/v1/auth/apikeys/${key.id}`)).status).toBe(204);

    await socket.closed();
    expect({ code: socket.closeCode, reason: socket.closeReason }).toEqual(REVOKED);
    // The socket closing proves the bus message arrived, and it dropped the cached key before closing.
    expect((await viaKey.get('/api/v1/organizations/current_organization')).status).toBe(401);
    expect((await viaToken.get('/api/v1/organizations/current_organization')).status).toBe(401);
  });

  it('a refresh token reused on one gateway ends its chain’s access tokens and sockets on another at once (issue 28, L6)', async () => {
    const admin = await adminClient(first.client);
    const user = await createUser(admin, 'user');
    const tokens = await login(first.client, user.email, user.password);
    const viaToken = second.client.withToken(tokens.access_token);
    expect((await viaToken.get('/api/v1/organizations/current_organization')).status).toBe(200); // cached there
    const socket = await TestSocket.open(second.baseUrl, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    await socket.next((frame) => frame.op === 'authenticated');
    expect((await first.client.post('/api/v1/auth/refresh_access_tokens', tokens)).status).toBe(200);

    expect((await first.client.post('/api/v1/auth/refresh_access_tokens', tokens)).status).toBe(401);

    await socket.closed();
    expect({ code: socket.closeCode, reason: socket.closeReason }).toEqual(REVOKED);
    expect((await viaToken.get('/api/v1/organizations/current_organization')).status).toBe(401);
  });

  it('lookups racing a key deletion never re-fill another gateway’s cache: after the 204 the key is refused there (issue 28 item 1)', async () => {
    const admin = await adminClient(first.client);
    for (let round = 0; round < 12; round += 1) {
      const key = (await admin.post('/api/v1/auth/apikeys', { permission: 'read-only' })).body;
      const viaKey = second.client.withHeaders({ 'x-api-key': key.apikey });
      // Cold lookups on the second gateway, sent in waves around the deletion on the first one (each round
      // shifts the waves), so that some are in flight when the deletion commits.
      const racing: Promise<unknown>[] = [];
      const waves = (async () => {
        for (let wave = 0; wave < 8; wave += 1) {
          racing.push(...Array.from({ length: 4 }, () => viaKey.get('/api/v1/organizations/current_organization')));
          await new Promise((resolve) => setTimeout(resolve, 1 + (round % 4)));
        }
      })();
      await new Promise((resolve) => setTimeout(resolve, round % 3));
      const deleted = await admin.delete(`/api/v1/auth/apikeys/${key.id}`);
      await waves;
      expect(deleted.status).toBe(204);
      // A marker published after the announcement reaches the second gateway after it (one publisher,
      // one channel): once it arrived, the second gateway has dropped the key.
      let arrive!: () => void;
      const arrived = new Promise<void>((resolve) => (arrive = resolve));
      // The marker names a key hash nobody holds: forgetting it changes nothing.
      const marker = `marker-${round}`;
      const unsubscribe = await second.gateway.services.bus.subscribe('auth:invalidate', (change) => {
        if (change.apiKeyHash === marker) arrive();
      });
      await first.gateway.services.bus.publish('auth:invalidate', { apiKeyHash: marker });
      await arrived;
      await unsubscribe();
      await Promise.all(racing);
      for (let probe = 0; probe < 5; probe += 1) {
        expect((await viaKey.get('/api/v1/organizations/current_organization')).status).toBe(401);
      }
    }
  });

  it('a lookup held on another gateway until after the deletion is announced does not bring the key back there (issue 28 item 1)', async () => {
    // The second gateway's key reads wait for a gate the test opens: a read slowed by a busy database.
    const storage = second.gateway.services.storage;
    const em = storage.em.bind(storage);
    let gate: Promise<void> | undefined;
    storage.em = (() => {
      const manager = em();
      return new Proxy(manager, {
        get(target, name, receiver) {
          if (name !== 'findOne') return Reflect.get(target, name, receiver);
          return async (entity: unknown, ...rest: unknown[]) => {
            const found = await (target.findOne as (...args: unknown[]) => Promise<unknown>).call(target, entity, ...rest);
            if (entity === ApiKeySchema && gate) await gate;
            return found;
          };
        },
      });
    }) as typeof storage.em;
    try {
      const admin = await adminClient(first.client);
      for (let round = 0; round < 3; round += 1) {
        const key = (await admin.post('/api/v1/auth/apikeys', { permission: 'read-only' })).body;
        const viaKey = second.client.withHeaders({ 'x-api-key': key.apikey });
        let open!: () => void;
        gate = new Promise<void>((resolve) => (open = resolve));
        const held = viaKey.get('/api/v1/organizations/current_organization');
        await new Promise((resolve) => setTimeout(resolve, 50)); // its read of the key has returned the row, and waits
        let announce!: () => void;
        const announced = new Promise<void>((resolve) => (announce = resolve));
        const unsubscribe = await second.gateway.services.bus.subscribe('auth:invalidate', (change) => {
          if (change.apiKeyId === key.id) announce();
        });
        expect((await admin.delete(`/api/v1/auth/apikeys/${key.id}`)).status).toBe(204);
        await announced; // the second gateway has dropped the key
        await unsubscribe();
        open();
        gate = undefined;
        await held;
        for (let probe = 0; probe < 3; probe += 1) {
          expect((await viaKey.get('/api/v1/organizations/current_organization')).status).toBe(401);
        }
      }
    } finally {
      storage.em = em;
    }
  });
});
