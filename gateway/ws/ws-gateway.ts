import type { HttpRequest, HttpResponse, TemplatedApp, us_socket_context_t, WebSocket } from 'uWebSockets.js';
import { z } from 'zod';
import { AppError, ErrorCode, ForbiddenError, UnauthenticatedError, toErrorBody } from '../../shared/errors.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { can } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import type { RouteDefinition } from '../http/route.js';
import { statusLine } from '../http/status-text.js';
import type { GatewayServices } from '../services.js';
import { MSGPACK_SUBPROTOCOL, decode, encode, type WireFormat } from './ws-codec.js';
import { LivePosition, TopicPositions } from './position-frames.js';
import { Connection, WS_CLOSE, type SocketLike, type SocketData } from './ws-connection.js';
import { authorizeTopic, topicKey } from './topics.js';

/** Replays what a subscriber missed (alarms since a seq), from storage, before live delivery starts. */
export type ReplayProvider = (principal: Principal, topic: string, sinceSeq: number, send: (message: object) => void) => Promise<void>;

export interface WsOptions {
  authTimeoutMs: number;
  maxMessageBytes: number;
  coalesceBytes: number;
  maxBufferBytes: number;
}

export { WS_CLOSE };

/** A pseudo-route for authenticating sockets: any credential may connect; each operation checks its own right. */
const SOCKET_ROUTE = { method: 'GET', path: '/api/v1/ws', summary: '', auth: 'authenticated', allowPositioningKey: true, handler: () => ({}) } as RouteDefinition;


const clientMessage = z.discriminatedUnion('op', [
  z.object({ op: z.literal('auth'), token: z.string().min(1), id: z.unknown().optional() }),
  z.object({ op: z.literal('subscribe'), topics: z.array(z.string()).min(1).max(100), since_seq: z.number().int().min(0).optional(), id: z.unknown().optional() }),
  z.object({ op: z.literal('unsubscribe'), topics: z.array(z.string()).min(1).max(100), id: z.unknown().optional() }),
  z.object({ op: z.literal('upload'), poses: z.array(z.unknown()).min(1).max(10_000), id: z.unknown().optional() }),
  z.object({ op: z.literal('ping'), id: z.unknown().optional() }),
]);

/**
 * The WebSocket side of the gateway at /api/v1/ws: authentication (Bearer header on the upgrade, or a first
 * `auth` message with a JWT or API key), topic subscriptions confined to the caller's organization, position
 * uploads acknowledged once durable, and fan-out of live positions, geofence events and alarms.
 */
export class WebSocketGateway {
  private readonly topics = new Map<string, Set<Connection>>();
  private readonly connections = new Set<Connection>();
  private readonly replays: { pattern: RegExp; provider: ReplayProvider }[] = [];
  private accepting = true;

  constructor(
    private readonly services: GatewayServices,
    private readonly options: WsOptions,
  ) {
    services.realtime.onFreshPositions((records) => this.publishPositions(records));
  }

  registerReplay(pattern: RegExp, provider: ReplayProvider): void {
    this.replays.push({ pattern, provider });
  }

  attach(app: TemplatedApp): void {
    app.ws<SocketData>('/api/v1/ws', {
      maxPayloadLength: this.options.maxMessageBytes,
      // Our own limits decide what to coalesce and when to disconnect; uWS must never drop silently.
      maxBackpressure: this.options.maxBufferBytes * 4,
      closeOnBackpressureLimit: 0,
      idleTimeout: 120,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => this.upgrade(res, req, context),
      open: (ws) => this.open(ws),
      message: (ws, data, isBinary) => this.onMessage(ws, data, isBinary),
      drain: (ws) => ws.getUserData().connection?.drain(),
      close: (ws) => this.onClose(ws),
    });
  }

  private upgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    const headers: Record<string, string> = {};
    req.forEach((name, value) => {
      headers[name] = value;
    });
    const key = headers['sec-websocket-key'] ?? '';
    const extensions = headers['sec-websocket-extensions'] ?? '';
    const offered = (headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
    const format: WireFormat = offered.includes(MSGPACK_SUBPROTOCOL) ? 'msgpack' : 'json';
    const protocol = format === 'msgpack' ? MSGPACK_SUBPROTOCOL : offered.includes('json') ? 'json' : '';
    const positions = req.getQuery('positions') || 'single';
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const refuse = (error: unknown) => {
      if (aborted) return;
      const body = toErrorBody(error);
      res.cork(() => res.writeStatus(statusLine(body.status)).writeHeader('content-type', 'application/json').end(JSON.stringify(body)));
    };
    if (!this.accepting) return refuse(new AppError(ErrorCode.Unavailable, 'The server is shutting down'));
    if (positions !== 'single' && positions !== 'batched') return refuse(new AppError(ErrorCode.BadRequest, 'positions must be single or batched'));
    const credentials = headers.authorization || headers['x-api-key'];
    const authenticated = credentials ? this.services.authenticator.authenticate(headers, SOCKET_ROUTE) : Promise.resolve(undefined);
    authenticated.then(
      (principal) => {
        if (aborted) return;
        res.cork(() => res.upgrade<SocketData>({ format, principal, batchedPositions: positions === 'batched' }, key, protocol, extensions, context));
      },
      refuse,
    );
  }

  private open(ws: WebSocket<SocketData>): void {
    const data = ws.getUserData();
    const connection = new Connection(ws as unknown as SocketLike, data.format, this.options, data.batchedPositions);
    data.connection = connection;
    this.connections.add(connection);
    if (data.principal) this.authenticated(connection, data.principal);
    else {
      connection.authTimer = setTimeout(() => connection.close(WS_CLOSE.unauthenticated, 'not authenticated in time'), this.options.authTimeoutMs);
    }
  }

  private authenticated(connection: Connection, principal: Principal, id?: unknown): void {
    clearTimeout(connection.authTimer);
    connection.principal = principal;
    connection.message({ op: 'authenticated', id, user_id: principal.userId, organization_id: principal.organizationId, role: principal.role, permission: principal.permission });
  }

  private onMessage(ws: WebSocket<SocketData>, data: ArrayBuffer, isBinary: boolean): void {
    const connection = ws.getUserData().connection!;
    let raw: unknown;
    try {
      raw = decode(data, isBinary); // decoded now: uWS reuses `data` after this callback
    } catch {
      return connection.error(new AppError(ErrorCode.InvalidJson, isBinary ? 'The frame is not valid msgpack' : 'The frame is not valid JSON'));
    }
    const parsed = clientMessage.safeParse(raw);
    if (!parsed.success) {
      const id = (raw as { id?: unknown } | null)?.id;
      return connection.error(new AppError(ErrorCode.BadRequest, 'Unknown or malformed operation: auth, subscribe, unsubscribe, upload, ping'), { id });
    }
    connection.inFlight += 1;
    this.handle(connection, parsed.data)
      .catch((error) => {
        if (!(error instanceof AppError)) this.services.logger.error({ err: error }, 'websocket operation failed');
        connection.error(error, { id: parsed.data.id });
      })
      .finally(() => {
        connection.inFlight -= 1;
      });
  }

  private async handle(connection: Connection, message: z.infer<typeof clientMessage>): Promise<void> {
    if (message.op === 'ping') return connection.message({ op: 'pong', id: message.id });
    if (message.op === 'auth') {
      if (connection.principal) throw new AppError(ErrorCode.Conflict, 'Already authenticated');
      const headers: Record<string, string> = message.token.startsWith('fc_') ? { 'x-api-key': message.token } : { authorization: `Bearer ${message.token}` };
      const principal = await this.services.authenticator.authenticate(headers, SOCKET_ROUTE);
      if (!connection.closed) this.authenticated(connection, principal, message.id);
      return;
    }
    const principal = connection.principal;
    if (!principal) throw new UnauthenticatedError('Authenticate first: {"op":"auth","token":...}');
    if (message.op === 'upload') {
      if (principal.permission === 'read-only') throw new ForbiddenError('This credential is read-only');
      if (!can(principal.role, 'positions:upload')) throw new ForbiddenError('Your role may not upload positions');
      await this.services.rateLimits?.consume(principal, { poses: message.poses.length });
      const batch = await this.services.pipeline.process(principal, message.poses);
      return connection.message({ op: 'ack', id: message.id, count: batch.records.length });
    }
    if (message.op === 'unsubscribe') {
      for (const topic of message.topics) this.unsubscribe(connection, topicKey(principal.organizationId, topic));
      return connection.message({ op: 'unsubscribed', id: message.id, topics: message.topics });
    }
    const accepted: string[] = [];
    for (const topic of message.topics) {
      try {
        await authorizeTopic(topic, principal, this.services.registry, this.services.storage);
        accepted.push(topic);
      } catch (error) {
        connection.error(error, { id: message.id, topic });
      }
    }
    for (const topic of accepted) {
      const replay = message.since_seq !== undefined ? this.replays.find((candidate) => candidate.pattern.test(topic)) : undefined;
      if (replay) {
        // Buffer live messages while replaying from storage, then drop those the replay already sent.
        await this.subscribeWithReplay(connection, principal, topic, message.since_seq!, replay.provider);
      } else {
        this.subscribe(connection, topicKey(principal.organizationId, topic));
      }
    }
    if (accepted.length > 0 || message.topics.length === 0) connection.message({ op: 'subscribed', id: message.id, topics: accepted });
  }

  private async subscribeWithReplay(connection: Connection, principal: Principal, topic: string, sinceSeq: number, provider: ReplayProvider): Promise<void> {
    const key = topicKey(principal.organizationId, topic);
    const live: object[] = [];
    const catcher = new Connection(connection.ws, connection.format, this.options);
    // A stand-in subscriber collects what goes live during the replay.
    catcher.message = (message: object) => void live.push(message);
    this.subscribe(catcher, key);
    let lastSeq = sinceSeq;
    try {
      await provider(principal, topic, sinceSeq, (message) => {
        const seq = (message as { data?: { seq?: number } }).data?.seq;
        if (typeof seq === 'number') lastSeq = Math.max(lastSeq, seq);
        connection.message(message);
      });
    } finally {
      this.unsubscribe(catcher, key);
    }
    this.subscribe(connection, key);
    for (const message of live) {
      const seq = (message as { data?: { seq?: number } }).data?.seq;
      if (typeof seq === 'number' && seq <= lastSeq) continue; // already replayed
      connection.message(message);
    }
  }

  private subscribe(connection: Connection, key: string): void {
    let set = this.topics.get(key);
    if (!set) this.topics.set(key, (set = new Set()));
    set.add(connection);
    connection.subscriptions.add(key);
  }

  private unsubscribe(connection: Connection, key: string): void {
    const set = this.topics.get(key);
    set?.delete(connection);
    if (set?.size === 0) this.topics.delete(key);
    connection.subscriptions.delete(key);
  }

  private onClose(ws: WebSocket<SocketData>): void {
    const connection = ws.getUserData().connection;
    if (!connection) return;
    connection.closed = true;
    clearTimeout(connection.authTimer);
    for (const key of connection.subscriptions) this.topics.get(key)?.delete(connection);
    for (const key of connection.subscriptions) if (this.topics.get(key)?.size === 0) this.topics.delete(key);
    this.connections.delete(connection);
  }

  /**
   * Live positions to `buildings/{id}/positions` and `devices/{id}` subscribers. A position's Feature is built
   * once, each topic's frames are encoded once per format (TopicPositions), and each subscriber gets all of
   * its frames of the batch in one write.
   */
  publishPositions(records: readonly PositionRecord[]): void {
    if (this.topics.size === 0) return;
    const groups = new Map<string, { group: TopicPositions; subscribers: Set<Connection> }>();
    const add = (key: string, topic: string, position: () => LivePosition) => {
      const subscribers = this.topics.get(key);
      if (!subscribers || subscribers.size === 0) return;
      let entry = groups.get(key);
      if (!entry) groups.set(key, (entry = { group: new TopicPositions(topic), subscribers }));
      entry.group.positions.push(position());
    };
    for (const record of records) {
      let position: LivePosition | undefined;
      const live = () => (position ??= new LivePosition(record, this.levelHeightOf(record)));
      add(topicKey(record.organizationId, `devices/${record.deviceId}`), `devices/${record.deviceId}`, live);
      if (record.buildingId !== null) {
        const topic = `buildings/${record.buildingId}/positions`;
        add(topicKey(record.organizationId, topic), topic, live);
      }
    }
    const outgoing = new Map<Connection, TopicPositions[]>();
    for (const { group, subscribers } of groups.values()) {
      for (const connection of subscribers) {
        const list = outgoing.get(connection);
        if (list) list.push(group);
        else outgoing.set(connection, [group]);
      }
    }
    for (const [connection, list] of outgoing) connection.sendPositions(list);
  }

  private levelHeightOf(record: PositionRecord): number | null {
    if (record.floorId === null || record.buildingId === null) return null;
    return this.services.registry.peek(record.buildingId)?.floors.get(record.floorId)?.levelHeight ?? null;
  }

  /** Any other message to a topic (geofence events, alarms, device events); never coalesced. */
  publish(organizationId: string, topic: string, op: string, data: unknown): void {
    const subscribers = this.topics.get(topicKey(organizationId, topic));
    if (!subscribers) return;
    const frame = { op, topic, data };
    const encoded: Partial<Record<WireFormat, string | Buffer>> = {};
    for (const connection of subscribers) connection.send((encoded[connection.format] ??= encode(connection.format, frame)));
  }

  /** Closes every socket with `code`, as a network drop would (tests use it; clients resume alarms with since_seq). */
  dropAll(code = 1012, reason = 'connection dropped'): number {
    const all = [...this.connections];
    for (const connection of all) connection.close(code, reason);
    return all.length;
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

  get connectionCount(): number {
    return this.connections.size;
  }

  /** Shutdown: refuse new sockets, let uploads in flight finish, then close every socket (1001). */
  async close(graceMs: number): Promise<void> {
    this.accepting = false;
    const deadline = Date.now() + graceMs;
    while ([...this.connections].some((c) => c.inFlight > 0) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    for (const connection of [...this.connections]) connection.close(WS_CLOSE.goingAway, 'server shutting down');
  }
}
