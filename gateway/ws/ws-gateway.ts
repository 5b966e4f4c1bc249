import type { TemplatedApp, WebSocket } from 'uWebSockets.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { Principal } from '../auth/principal.js';
import type { TopicEvents } from './event-frames.js';
import { Connection, WS_CLOSE, type SocketLike, type SocketData, type WsOptions } from './ws-connection.js';
import { SocketRevalidation } from './socket-revalidation.js';
import { BacklogCeiling } from './backlog-ceiling.js';
import { SocketAdmission } from './socket-admission.js';
import { TopicFanOut } from './topic-fan-out.js';
import { TopicRegistry, type ReplayProvider } from './topic-registry.js';
import { WsProtocol, type WsDependencies } from './ws-protocol.js';
import { WsUpgrade } from './ws-upgrade.js';

/**
 * uWS drops a message over its maxPayloadLength without a close frame (the client sees 1006), so uWS gets a
 * higher ceiling and our own limit is checked in the handler, answering 1009. Past the ceiling a message is
 * still refused unread, so memory stays bounded.
 */
export const UWS_PAYLOAD_CEILING_FACTOR = 2;

/**
 * The WebSocket side of the gateway at /api/v1/ws, and the one job of this file: it registers the endpoint with
 * uWS and keeps the set of open sockets (open, close, stats, revocation, shutdown). The rest is composed:
 * the upgrade (ws-upgrade.ts), admission and quotas (socket-admission.ts), the message protocol
 * (ws-protocol.ts), who follows which topic (topic-registry.ts) and the fan-out of live frames
 * (topic-fan-out.ts), which ws/live-feeds.ts drives through publishPositions, publishEvents and publish.
 */
export class WebSocketGateway {
  private readonly connections = new Set<Connection>();
  /** Re-checks authenticated sockets against storage: revoked while authenticating, periodically, after a resync. */
  readonly revalidation: SocketRevalidation;
  private readonly backlogCeiling: BacklogCeiling;
  private readonly admission: SocketAdmission;
  private readonly topics: TopicRegistry;
  private readonly fanOut: TopicFanOut;
  private readonly protocol: WsProtocol;
  private readonly upgrades: WsUpgrade;

  constructor(
    private readonly services: WsDependencies,
    private readonly options: WsOptions,
  ) {
    // A revocation keeps its key or user suspect well past an authentication in flight and a cache entry's life.
    const revalidation = { intervalMs: options.revalidateMs, suspectMs: 60_000 };
    this.revalidation = new SocketRevalidation(services.storage, () => this.connections, services.logger, revalidation);
    this.backlogCeiling = new BacklogCeiling(() => this.connections, options.maxTotalBacklogBytes);
    this.admission = new SocketAdmission(services.rateLimits, options);
    this.topics = new TopicRegistry(services, options);
    this.fanOut = new TopicFanOut(this.topics, services.registry);
    this.protocol = new WsProtocol(services, options, this.admission, this.topics, this.revalidation);
    this.upgrades = new WsUpgrade(services, this.admission, options, () => {
      for (const connection of this.connections) if (!connection.closed) return connection.ws;
      return undefined;
    });
  }

  registerReplay(pattern: RegExp, provider: ReplayProvider): void {
    this.topics.registerReplay(pattern, provider);
  }

  attach(app: TemplatedApp): void {
    this.revalidation.start();
    this.backlogCeiling.start();
    // Nothing a client sends may throw out of a uWS callback: that would be an uncaught exception.
    const guarded =
      <A extends unknown[]>(name: string, callback: (...args: A) => void) =>
      (...args: A) => {
        try {
          callback(...args);
        } catch (error) {
          this.services.logger.error({ err: error, callback: name }, 'websocket callback failed');
        }
      };
    app.ws<SocketData>('/api/v1/ws', {
      maxPayloadLength: this.options.maxMessageBytes * UWS_PAYLOAD_CEILING_FACTOR,
      // Our own limits decide what to coalesce and when to disconnect; uWS must never drop silently.
      maxBackpressure: this.options.maxBufferBytes * 4,
      closeOnBackpressureLimit: 0,
      idleTimeout: 120,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => this.upgrades.upgrade(res, req, context),
      open: guarded('open', (ws: WebSocket<SocketData>) => this.open(ws)),
      message: (ws, data, isBinary) => this.protocol.onMessage(ws, data, isBinary),
      drain: guarded('drain', (ws: WebSocket<SocketData>) => ws.getUserData().connection?.drain()),
      close: guarded('close', (ws: WebSocket<SocketData>, code: number, message: ArrayBuffer) => this.onClose(ws, code, message)),
    });
  }

  private open(ws: WebSocket<SocketData>): void {
    const data = ws.getUserData();
    const connection = new Connection(ws as unknown as SocketLike, data.format, this.options, data.batchedPositions, data.batchedEvents);
    data.connection = connection;
    connection.address = data.address;
    connection.releaseQuota = data.releaseQuota;
    connection.unauthenticatedAddress = data.unauthenticatedAddress;
    this.connections.add(connection);
    if (data.principal) this.protocol.authenticated(connection, data.principal, undefined, data.expiresAt);
    else {
      connection.authTimer = setTimeout(
        () => connection.close(WS_CLOSE.unauthenticated, 'not authenticated in time'),
        this.options.authTimeoutMs,
      );
    }
  }

  private onClose(ws: WebSocket<SocketData>, code: number, message: ArrayBuffer): void {
    const connection = ws.getUserData().connection;
    if (!connection) return;
    // Who ended it, and how: a client that saw 1006 where the server closed with a code lost the close frame on the way.
    if (this.services.logger.isLevelEnabled('debug')) {
      const by = connection.closed ? 'server' : 'client';
      this.services.logger.debug({ code, reason: Buffer.from(message).toString(), by }, 'websocket closed');
    }
    connection.closed = true;
    clearTimeout(connection.authTimer);
    clearTimeout(connection.expiryTimer);
    connection.releaseQuota?.();
    if (connection.unauthenticatedAddress !== undefined) this.admission.releaseUnauthenticated(connection.unauthenticatedAddress);
    connection.unauthenticatedAddress = undefined;
    this.topics.forget(connection);
    this.connections.delete(connection);
  }

  /** Live positions to their topics' subscribers (topic-fan-out.ts). */
  publishPositions(records: readonly PositionRecord[]): void {
    this.fanOut.publishPositions(records);
  }

  /** One bus message's geofence events and event-area contents of an organization (topic-fan-out.ts). */
  publishEvents(organizationId: string, groups: readonly TopicEvents[]): void {
    this.fanOut.publishEvents(organizationId, groups);
  }

  /** Any other message to a topic (alarms), never coalesced (topic-fan-out.ts). */
  publish(organizationId: string, topic: string, op: string, data: unknown): void {
    this.fanOut.publish(organizationId, topic, op, data);
  }

  /** Whether any socket follows `topic` of the organization (so nothing is presented for nobody). */
  followed(organizationId: string, topic: string): boolean {
    return this.topics.followed(organizationId, topic);
  }

  /** Drops the `devices/{id}` subscriptions their sockets may no longer hold (topic-registry.ts). */
  recheckDeviceSubscriptions(organizationId?: string): Promise<void> {
    return this.topics.recheckDeviceSubscriptions(organizationId);
  }

  /** Read at scrape time by the metrics (shared/metrics): open sockets, their subscriptions, bytes not yet sent. */
  stats(): { connections: number; subscriptions: number; backlogBytes: number } {
    let subscriptions = 0;
    let backlogBytes = 0;
    for (const connection of this.connections) {
      subscriptions += connection.subscriptions.size;
      if (!connection.closed) backlogBytes += connection.ws.getBufferedAmount();
    }
    return { connections: this.connections.size, subscriptions, backlogBytes };
  }

  /** Closes every socket with `code`, as a network drop would (tests use it; clients resume alarms with since_seq). */
  dropAll(code = 1012, reason = 'connection dropped'): number {
    const all = [...this.connections];
    for (const connection of all) connection.close(code, reason);
    return all.length;
  }

  /**
   * Closes, with 1012, every socket that follows a topic it could resume with `since_seq` (alarms, evacuations):
   * what it missed is replayed from storage when it subscribes again. Returns how many were closed.
   */
  closeResumable(reason: string): number {
    let closed = 0;
    for (const connection of [...this.connections]) {
      for (const key of connection.subscriptions) {
        if (!this.topics.replayFor(key.slice(key.indexOf('|') + 1))) continue;
        connection.close(WS_CLOSE.resume, reason);
        closed++;
        break;
      }
    }
    return closed;
  }

  /**
   * Closes every authenticated socket whose principal matches, with `code` and `reason` (revocation: a deleted
   * key, a changed password or role). Returns how many were closed.
   */
  closeWhere(match: (principal: Principal) => boolean, code: number, reason: string): number {
    let closed = 0;
    for (const connection of [...this.connections]) {
      if (connection.principal && match(connection.principal)) {
        connection.close(code, reason);
        closed++;
      }
    }
    return closed;
  }

  /** Shutdown: refuse new sockets, let uploads in flight finish, then close every socket (1001). */
  async close(graceMs: number): Promise<void> {
    this.upgrades.accepting = false;
    this.revalidation.stop();
    this.backlogCeiling.stop();
    const deadline = Date.now() + graceMs;
    while ([...this.connections].some((c) => c.inFlight > 0) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 10));
    for (const connection of [...this.connections]) connection.close(WS_CLOSE.goingAway, 'server shutting down');
  }
}
