import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Principal } from '../../gateway/auth/principal.js';
import { attachLiveFeeds } from '../../gateway/ws/live-feeds.js';
import { SocketRevalidation } from '../../gateway/ws/socket-revalidation.js';
import { Connection, type SocketLike } from '../../gateway/ws/ws-connection.js';
import type { WebSocketGateway } from '../../gateway/ws/ws-gateway.js';
import type { Bus } from '../../gateway/bus-channels.js';
import { createLogger } from '../../shared/logger.js';
import type { Storage } from '../../shared/storage/index.js';

const logger = createLogger('silent');

class FakeSocket implements SocketLike {
  ended?: { code?: number; reason?: string };
  getBufferedAmount() {
    return 0;
  }
  send() {
    return 1;
  }
  cork(callback: () => void) {
    callback();
  }
  end(code?: number, reason?: string) {
    this.ended = { code, reason };
  }
}

/** Storage answering the two reads of credential-check.ts from these rows; `reads` counts them. */
function fakeStorage(rows: { users: { id: string; organization_id: string; credential_version: number }[]; keys: string[] }) {
  const storage = {
    reads: 0,
    failing: false,
    async execute(sql: string) {
      storage.reads++;
      if (storage.failing) throw new Error('connection refused');
      return sql.includes('from users') ? rows.users : rows.keys.map((id) => ({ id }));
    },
  };
  return storage;
}

const principal = (userId: string, extra: Partial<Principal> = {}): Principal => ({
  userId,
  email: `${userId}@x.test`,
  organizationId: 'org',
  role: 'user',
  platformAdmin: false,
  permission: 'read-write',
  via: 'apikey',
  credentialVersion: 0,
  ...extra,
});
const connectionOf = (who: Principal) => {
  const connection = new Connection(new FakeSocket(), 'json', { coalesceBytes: 1000, maxBufferBytes: 5000 });
  connection.principal = who;
  return connection;
};
const endOf = (connection: Connection) => (connection.ws as FakeSocket).ended;

describe('SocketRevalidation', () => {
  afterEach(() => vi.useRealTimers());

  it('checks a socket authenticated after its key was revoked against storage, and closes it; others are not read', async () => {
    const storage = fakeStorage({ users: [{ id: 'u1', organization_id: 'org', credential_version: 0 }], keys: [] });
    let now = 1000;
    const revalidation = new SocketRevalidation(
      storage as unknown as Storage,
      () => [],
      logger,
      { intervalMs: 0, suspectMs: 60_000 },
      () => now,
    );
    const innocent = connectionOf(principal('u2', { apiKeyId: 'k2' }));
    revalidation.authenticated(innocent, undefined);
    expect(storage.reads).toBe(0);
    revalidation.revoked({ apiKeyId: 'k1' });
    const raced = connectionOf(principal('u1', { apiKeyId: 'k1' }));
    revalidation.authenticated(raced, undefined);
    await vi.waitFor(() => expect(endOf(raced)).toEqual({ code: 4401, reason: 'credential revoked' }));
    // Past the suspect window a socket of that key is not read again on open (the periodic sweep covers it).
    now += 60_001;
    const reads = storage.reads;
    revalidation.authenticated(connectionOf(principal('u1', { apiKeyId: 'k1' })), undefined);
    expect(storage.reads).toBe(reads);
  });

  it('a sweep closes the sockets whose user is gone, moved, or changed credential version, or whose key is gone', async () => {
    const storage = fakeStorage({
      users: [
        { id: 'kept', organization_id: 'org', credential_version: 0 },
        { id: 'moved', organization_id: 'elsewhere', credential_version: 0 },
        { id: 'changed', organization_id: 'org', credential_version: 3 },
      ],
      keys: ['live-key'],
    });
    const sockets = {
      kept: connectionOf(principal('kept')),
      keptKey: connectionOf(principal('kept', { apiKeyId: 'live-key' })),
      gone: connectionOf(principal('gone')),
      moved: connectionOf(principal('moved')),
      changed: connectionOf(principal('changed', { credentialVersion: 2 })),
      deletedKey: connectionOf(principal('kept', { apiKeyId: 'deleted-key' })),
    };
    const revalidation = new SocketRevalidation(storage as unknown as Storage, () => Object.values(sockets), logger, {
      intervalMs: 0,
      suspectMs: 1,
    });
    await revalidation.sweep();
    const closed = Object.entries(sockets)
      .filter(([, connection]) => connection.closed)
      .map(([name]) => name);
    expect(closed.sort()).toEqual(['changed', 'deletedKey', 'gone', 'moved']);
    expect(storage.reads).toBe(2); // one read of users, one of keys, for all of them
  });

  it('storage out of reach closes nothing (checked again at the next sweep)', async () => {
    const storage = fakeStorage({ users: [], keys: [] });
    storage.failing = true;
    const socket = connectionOf(principal('gone'));
    const revalidation = new SocketRevalidation(storage as unknown as Storage, () => [socket], logger, { intervalMs: 0, suspectMs: 1 });
    await revalidation.sweep();
    expect(socket.closed).toBe(false);
    storage.failing = false;
    await revalidation.sweep();
    expect(endOf(socket)).toEqual({ code: 4401, reason: 'credential revoked' });
  });

  it('closes a socket when the token it authenticated with expires, not before', () => {
    vi.useFakeTimers({ now: 0 });
    const revalidation = new SocketRevalidation(fakeStorage({ users: [], keys: [] }) as unknown as Storage, () => [], logger, {
      intervalMs: 0,
      suspectMs: 1,
    });
    const socket = connectionOf(principal('u1', { via: 'jwt' }));
    revalidation.authenticated(socket, 90_000);
    vi.advanceTimersByTime(89_999);
    expect(socket.closed).toBe(false);
    vi.advanceTimersByTime(1);
    expect(endOf(socket)).toEqual({ code: 4401, reason: 'token expired' });
    // Already expired when it authenticates: closed at once.
    const late = connectionOf(principal('u1', { via: 'jwt' }));
    revalidation.authenticated(late, 50_000);
    expect(endOf(late)).toEqual({ code: 4401, reason: 'token expired' });
  });

  it('runs periodically, every intervalMs', async () => {
    vi.useFakeTimers({ now: 0 });
    const storage = fakeStorage({ users: [], keys: [] });
    const socket = connectionOf(principal('gone'));
    const revalidation = new SocketRevalidation(storage as unknown as Storage, () => [socket], logger, {
      intervalMs: 30_000,
      suspectMs: 1,
    });
    revalidation.start();
    await vi.advanceTimersByTimeAsync(29_999);
    expect(storage.reads).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(socket.closed).toBe(true);
    revalidation.stop();
  });

  it('the live feeds sweep every socket when the bus resyncs (an auth:invalidate message may have been lost), and close those that resume', async () => {
    const resyncs: (() => void)[] = [];
    const bus = {
      subscribe: async () => undefined,
      onResync: (listener: () => void) => (resyncs.push(listener), () => undefined),
    } as unknown as Bus;
    const sweep = vi.fn(async () => undefined);
    const websockets = {
      revalidation: { sweep },
      recheckDeviceSubscriptions: vi.fn(async () => undefined),
      closeResumable: vi.fn(() => 0),
      registerReplay: () => undefined,
    } as unknown as WebSocketGateway;
    const realtime = { onFreshPositions: () => undefined };
    await attachLiveFeeds({ bus, realtime, alarms: {} } as never, websockets);
    expect(sweep).not.toHaveBeenCalled();
    for (const listener of resyncs) listener();
    expect(sweep).toHaveBeenCalledTimes(1);
    expect(websockets.recheckDeviceSubscriptions).toHaveBeenCalledWith();
    // Alarm and evacuation pushes may have been lost too: their sockets are told to resume (1012).
    expect(websockets.closeResumable).toHaveBeenCalledTimes(1);
  });
});
