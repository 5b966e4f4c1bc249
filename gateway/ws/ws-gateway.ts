import type { HttpRequest, HttpResponse, TemplatedApp, us_socket_context_t, WebSocket } from 'uWebSockets.js';
import { z } from 'zod';
import { AppError, ErrorCode, ForbiddenError, UnauthenticatedError, ValidationError, toErrorBody } from '../../shared/errors.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { can, confinedUserId } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import type { RouteDefinition } from '../http/route.js';
import { mayHoldRefusedText, refuseTextPostgresRefuses } from '../http/pg-text.js';
import { statusLine } from '../http/status-text.js';
import type { Logger } from '../../shared/logger.js';
import type { Storage } from '../../shared/storage/index.js';
import type { RequestAuthenticator } from '../auth/authenticator.js';
import type { RateLimits } from '../http/rate-limit.js';
import type { PositionPipeline } from '../pipeline/position-pipeline.js';
import type { BuildingRegistry } from '../realtime/building-registry.js';
import { MSGPACK_SUBPROTOCOL, decode, encode, type WireFormat } from './ws-codec.js';
import { TopicEvents } from './event-frames.js';
import { LivePosition, TopicPositions } from './position-frames.js';
import { Connection, WS_CLOSE, type SocketLike, type SocketData } from './ws-connection.js';
import { ReplayGate } from './replay-gate.js';
import { bearerExpiry } from './credential-check.js';
import { SocketRevalidation } from './socket-revalidation.js';
import { SocketQuotas } from './socket-quotas.js';
import { BacklogCeiling } from './backlog-ceiling.js';
import { authorizeTopic, isConfinedTopic, isDeviceTopic, topicKey } from './topics.js';

/**
 * Replays what a subscriber missed (alarms since a seq), from storage, in seq order, before live delivery
 * starts. `confinedTo` is the user a plain user is confined to (confinedUserId): replay only what is about them.
 */
export type ReplayProvider = (principal: Principal, topic: string, sinceSeq: number, send: (message: object) => void, confinedTo: string | undefined) => Promise<void>;

export interface WsOptions {
  authTimeoutMs: number;
  maxMessageBytes: number;
  coalesceBytes: number;
  maxBufferBytes: number;
  maxTopics: number;
  maxInFlight: number;
  maxUnauthenticatedPerAddress: number;
  /** Every authenticated socket is checked against storage this often (0: never; tests). */
  revalidateMs: number;
  /** Per-socket limit of unsent position and event frames (alarms have maxBufferBytes). */
  maxFeedBufferBytes: number;
  /** Unsent bytes over all sockets; past it the largest backlogs are closed. */
  maxTotalBacklogBytes: number;
  maxSocketsPerUser: number;
  maxSocketsPerCredential: number;
  maxSocketsPerAddress: number;
}

/** What the WebSocket side uses of the gateway: authentication, uploads through the pipeline, topic checks. */
export interface WsDependencies {
  logger: Logger;
  authenticator: Pick<RequestAuthenticator, 'authenticate'>;
  pipeline: Pick<PositionPipeline, 'process'>;
  registry: BuildingRegistry;
  storage: Storage;
  rateLimits?: Pick<RateLimits, 'consume'>;
}

/**
 * uWS drops a message over its maxPayloadLength without a close frame (the client sees 1006), so uWS gets a
 * higher ceiling and our own limit is checked in the handler, answering 1009. Past the ceiling a message is
 * still refused unread, so memory stays bounded.
 */
export const UWS_PAYLOAD_CEILING_FACTOR = 2;

/** An id the client chose, echoed in the reply: bounded, so echoing it can neither blow the stack nor the frame. */
const MAX_ID_LENGTH = 128;
const messageId = z.union([z.string().max(MAX_ID_LENGTH), z.number().finite()]);
type MessageId = z.infer<typeof messageId>;

export { WS_CLOSE };

/** A pseudo-route for authenticating sockets: any credential may connect; each operation checks its own right. */
const SOCKET_ROUTE = { method: 'GET', path: '/api/v1/ws', summary: '', auth: 'authenticated', allowPositioningKey: true, handler: () => ({}) } as RouteDefinition;


const clientMessage = z.discriminatedUnion('op', [
  z.object({ op: z.literal('auth'), token: z.string().min(1), id: messageId.optional() }),
  z.object({ op: z.literal('subscribe'), topics: z.array(z.string()).min(1).max(100), since_seq: z.number().int().min(0).optional(), id: messageId.optional() }),
  z.object({ op: z.literal('unsubscribe'), topics: z.array(z.string()).min(1).max(100), id: messageId.optional() }),
  z.object({ op: z.literal('upload'), poses: z.array(z.unknown()).min(1).max(10_000), id: messageId.optional() }),
  z.object({ op: z.literal('ping'), id: messageId.optional() }),
]);
type ClientMessage = z.infer<typeof clientMessage>;

/**
 * The WebSocket side of the gateway at /api/v1/ws: authentication (Bearer header on the upgrade, or a first
 * `auth` message with a JWT or API key), topic subscriptions confined to the caller's organization, position
 * uploads acknowledged once durable, and fan-out of live positions, geofence events and alarms.
 */
export class WebSocketGateway {
  private readonly topics = new Map<string, Set<Connection>>();
  private readonly connections = new Set<Connection>();
  private readonly replays: { pattern: RegExp; provider: ReplayProvider }[] = [];
  /** Unauthenticated sockets per remote address (entries go when they reach zero). */
  private readonly unauthenticated = new Map<string, number>();
  private accepting = true;
  /** Re-checks authenticated sockets against storage: revoked while authenticating, periodically, after a resync. */
  readonly revalidation: SocketRevalidation;
  private readonly quotas: SocketQuotas;
  private readonly backlogCeiling: BacklogCeiling;

  constructor(
    private readonly services: WsDependencies,
    private readonly options: WsOptions,
  ) {
    // A revocation keeps its key or user suspect well past an authentication in flight and a cache entry's life.
    this.revalidation = new SocketRevalidation(services.storage, () => this.connections, services.logger, { intervalMs: options.revalidateMs, suspectMs: 60_000 });
    this.quotas = new SocketQuotas({ perUser: options.maxSocketsPerUser, perCredential: options.maxSocketsPerCredential, perAddress: options.maxSocketsPerAddress });
    this.backlogCeiling = new BacklogCeiling(() => this.connections, options.maxTotalBacklogBytes);
  }

  /**
   * What every authentication of a socket passes (the upgrade's, or an `auth` message's): it counts against
   * the credential's request budget, and takes a slot of its user's, credential's and address's socket quotas.
   * Returns the function giving the slots back; throws 429 past either.
   */
  private async admit(principal: Principal, address: string): Promise<() => void> {
    await this.services.rateLimits?.consume(principal);
    return this.quotas.take(principal, address);
  }

  registerReplay(pattern: RegExp, provider: ReplayProvider): void {
    this.replays.push({ pattern, provider });
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
      upgrade: (res, req, context) => this.upgrade(res, req, context),
      open: guarded('open', (ws: WebSocket<SocketData>) => this.open(ws)),
      message: (ws, data, isBinary) => this.onMessage(ws, data, isBinary),
      drain: guarded('drain', (ws: WebSocket<SocketData>) => ws.getUserData().connection?.drain()),
      close: guarded('close', (ws: WebSocket<SocketData>) => this.onClose(ws)),
    });
  }

  private upgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const refuse = (error: unknown) => {
      if (aborted) return;
      if (!(error instanceof AppError)) this.services.logger.error({ err: error }, 'websocket upgrade failed');
      const body = toErrorBody(error);
      try {
        res.cork(() => res.writeStatus(statusLine(body.status)).writeHeader('content-type', 'application/json').end(JSON.stringify(body)));
      } catch (again) {
        this.services.logger.error({ err: again }, 'websocket upgrade refusal failed');
      }
    };
    let reserved: string | undefined;
    const release = () => {
      if (reserved !== undefined) this.releaseUnauthenticated(reserved);
      reserved = undefined;
    };
    try {
      const headers: Record<string, string> = {};
      req.forEach((name, value) => {
        headers[name] = value;
      });
      const address = Buffer.from(res.getRemoteAddressAsText()).toString();
      const key = headers['sec-websocket-key'] ?? '';
      const extensions = headers['sec-websocket-extensions'] ?? '';
      const offered = (headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
      const format: WireFormat = offered.includes(MSGPACK_SUBPROTOCOL) ? 'msgpack' : 'json';
      const protocol = format === 'msgpack' ? MSGPACK_SUBPROTOCOL : offered.includes('json') ? 'json' : '';
      const positions = req.getQuery('positions') || 'single';
      const events = req.getQuery('events') || 'single';
      if (!this.accepting) return refuse(new AppError(ErrorCode.Unavailable, 'The server is shutting down'));
      if (positions !== 'single' && positions !== 'batched') return refuse(new AppError(ErrorCode.BadRequest, 'positions must be single or batched'));
      if (events !== 'single' && events !== 'batched') return refuse(new AppError(ErrorCode.BadRequest, 'events must be single or batched'));
      const credentials = headers.authorization || headers['x-api-key'];
      if (!credentials) {
        // Reserved now, not on open: upgrades from one address may be in progress together.
        if ((this.unauthenticated.get(address) ?? 0) >= this.options.maxUnauthenticatedPerAddress) {
          return refuse(new AppError(ErrorCode.RateLimited, `Too many unauthenticated sockets from your address (at most ${this.options.maxUnauthenticatedPerAddress}): authenticate or close some first`));
        }
        this.unauthenticated.set(address, (this.unauthenticated.get(address) ?? 0) + 1);
        reserved = address;
      }
      let releaseQuota: (() => void) | undefined;
      const authenticated = credentials
        ? this.services.authenticator.authenticate(headers, SOCKET_ROUTE).then(async (principal) => {
            releaseQuota = await this.admit(principal, address);
            return principal;
          })
        : Promise.resolve(undefined);
      authenticated
        .then((principal) => {
          if (aborted) return (release(), releaseQuota?.());
          const data: SocketData = { format, principal, address, releaseQuota, expiresAt: bearerExpiry(headers.authorization), batchedPositions: positions === 'batched', batchedEvents: events === 'batched', unauthenticatedAddress: reserved };
          res.cork(() => res.upgrade<SocketData>(data, key, protocol, extensions, context));
          reserved = undefined; // the socket holds the slot now, until it authenticates or closes
        })
        .catch((error) => {
          release();
          releaseQuota?.();
          refuse(error);
        });
    } catch (error) {
      release();
      refuse(error);
    }
  }

  private releaseUnauthenticated(address: string): void {
    const count = (this.unauthenticated.get(address) ?? 1) - 1;
    if (count > 0) this.unauthenticated.set(address, count);
    else this.unauthenticated.delete(address);
  }

  private open(ws: WebSocket<SocketData>): void {
    const data = ws.getUserData();
    const connection = new Connection(ws as unknown as SocketLike, data.format, this.options, data.batchedPositions, data.batchedEvents);
    data.connection = connection;
    connection.address = data.address;
    connection.releaseQuota = data.releaseQuota;
    connection.unauthenticatedAddress = data.unauthenticatedAddress;
    this.connections.add(connection);
    if (data.principal) this.authenticated(connection, data.principal, undefined, data.expiresAt);
    else {
      connection.authTimer = setTimeout(() => connection.close(WS_CLOSE.unauthenticated, 'not authenticated in time'), this.options.authTimeoutMs);
    }
  }

  private authenticated(connection: Connection, principal: Principal, id: MessageId | undefined, expiresAt: number | undefined): void {
    clearTimeout(connection.authTimer);
    if (connection.unauthenticatedAddress !== undefined) this.releaseUnauthenticated(connection.unauthenticatedAddress);
    connection.unauthenticatedAddress = undefined;
    connection.principal = principal;
    connection.confinedTo = confinedUserId(principal);
    // From here the revocation feed closes it (closeWhere); a revocation it raced is caught by a check in storage.
    this.revalidation.authenticated(connection, expiresAt);
    if (connection.closed) return;
    connection.message({ op: 'authenticated', id, user_id: principal.userId, organization_id: principal.organizationId, role: principal.role, permission: principal.permission });
  }

  /**
   * The one boundary every message goes through: whatever the frame holds, and whatever its handling throws
   * (synchronously or not), the client gets an error frame and the connection stays consistent.
   */
  private onMessage(ws: WebSocket<SocketData>, data: ArrayBuffer, isBinary: boolean): void {
    const connection = ws.getUserData().connection;
    if (!connection || connection.closed) return;
    if (data.byteLength > this.options.maxMessageBytes) return connection.close(WS_CLOSE.messageTooBig, 'message too big');
    let id: MessageId | undefined;
    try {
      let raw: unknown;
      // Only an escape can put a string PostgreSQL refuses (NUL, a lone surrogate) in JSON text; msgpack is walked.
      let mayHoldRefusedStrings = isBinary;
      try {
        // Decoded now: uWS reuses `data` after this callback.
        if (isBinary) raw = decode(data, true);
        else {
          const text = Buffer.from(data).toString('utf8');
          mayHoldRefusedStrings = mayHoldRefusedText(text);
          raw = JSON.parse(text);
        }
      } catch {
        throw new AppError(ErrorCode.InvalidJson, isBinary ? 'The frame is not valid msgpack' : 'The frame is not valid JSON');
      }
      const rawId = typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as { id?: unknown }).id : undefined;
      if (rawId !== undefined) {
        const checked = messageId.safeParse(rawId);
        if (!checked.success) throw new AppError(ErrorCode.BadRequest, `id must be a string of at most ${MAX_ID_LENGTH} characters or a finite number`);
        id = checked.data;
      }
      const parsed = clientMessage.safeParse(raw);
      if (!parsed.success) throw new AppError(ErrorCode.BadRequest, 'Unknown or malformed operation: auth, subscribe, unsubscribe, upload, ping');
      const message = parsed.data;
      // As on HTTP: strings PostgreSQL cannot store never get as far as a query (a topic, a device id).
      if (mayHoldRefusedStrings) refuseTextPostgresRefuses(message, undefined);
      if (message.op === 'ping') return connection.message({ op: 'pong', id });
      if (connection.inFlight >= this.options.maxInFlight) {
        throw new AppError(ErrorCode.RateLimited, `At most ${this.options.maxInFlight} operations may be in flight on one socket: wait for their replies`);
      }
      connection.inFlight += 1;
      this.handle(connection, message)
        .catch((error) => this.fail(connection, error, id))
        .finally(() => {
          connection.inFlight -= 1;
        });
    } catch (error) {
      this.fail(connection, error, id);
    }
  }

  /** Answers an error frame (never throws): if even that fails, the socket is closed rather than left half-done. */
  private fail(connection: Connection, error: unknown, id: MessageId | undefined): void {
    try {
      if (!(error instanceof AppError)) this.services.logger.error({ err: error }, 'websocket operation failed');
      connection.error(error, id === undefined ? {} : { id });
    } catch (again) {
      try {
        this.services.logger.error({ err: again }, 'websocket error frame failed');
      } finally {
        connection.close(WS_CLOSE.internalError, 'internal error');
      }
    }
  }

  private async handle(connection: Connection, message: Exclude<ClientMessage, { op: 'ping' }>): Promise<void> {
    if (message.op === 'auth') {
      if (connection.principal) throw new AppError(ErrorCode.Conflict, 'Already authenticated');
      const headers: Record<string, string> = message.token.startsWith('fc_') ? { 'x-api-key': message.token } : { authorization: `Bearer ${message.token}` };
      const principal = await this.services.authenticator.authenticate(headers, SOCKET_ROUTE);
      if (connection.closed) return;
      if (connection.principal) throw new AppError(ErrorCode.Conflict, 'Already authenticated');
      connection.releaseQuota = await this.admit(principal, connection.address);
      if (connection.closed) return connection.releaseQuota();
      this.authenticated(connection, principal, message.id, bearerExpiry(headers.authorization));
      return;
    }
    const principal = connection.principal;
    if (!principal) throw new UnauthenticatedError('Authenticate first: {"op":"auth","token":...}');
    if (message.op === 'upload') {
      if (principal.permission === 'read-only') throw new ForbiddenError('This credential is read-only');
      if (!can(principal.role, 'positions:upload')) throw new ForbiddenError('Your role may not upload positions');
      await this.services.rateLimits?.consume(principal, { poses: message.poses.length });
      await this.services.pipeline.process(principal, message.poses);
      // Every pose was accepted, those a tracking window dropped included (the app need not know).
      return connection.message({ op: 'ack', id: message.id, count: message.poses.length });
    }
    if (message.op === 'unsubscribe') {
      for (const topic of message.topics) this.unsubscribe(connection, topicKey(principal.organizationId, topic));
      return connection.message({ op: 'unsubscribed', id: message.id, topics: message.topics });
    }
    const fresh = new Set(message.topics.map((topic) => topicKey(principal.organizationId, topic)).filter((key) => !connection.subscriptions.has(key)));
    if (connection.subscriptions.size + fresh.size > this.options.maxTopics) throw this.tooManyTopics(connection);
    const accepted: string[] = [];
    for (const topic of message.topics) {
      try {
        await authorizeTopic(topic, principal, this.services.registry, this.services.storage);
        const key = topicKey(principal.organizationId, topic);
        const replay = message.since_seq !== undefined ? this.replays.find((candidate) => candidate.pattern.test(topic)) : undefined;
        if (replay) await this.subscribeWithReplay(connection, principal, topic, key, message.since_seq!, replay.provider);
        else this.subscribe(connection, key);
        accepted.push(topic);
      } catch (error) {
        if (!(error instanceof AppError)) this.services.logger.error({ err: error, topic }, 'websocket subscription failed');
        connection.error(error, { id: message.id, topic });
      }
    }
    if (accepted.length > 0) connection.message({ op: 'subscribed', id: message.id, topics: accepted });
  }

  private tooManyTopics(connection: Connection): AppError {
    const max = this.options.maxTopics;
    return new ValidationError([{ field: 'topics', message: `a socket may hold at most ${max} topics (this one holds ${connection.subscriptions.size}): unsubscribe some first` }], 'Too many topics');
  }

  /**
   * Subscribes at once, so that live alarms reach the subscription's ReplayGate while the replay from storage
   * runs; the gate holds them and, when the replay is done, sends those it did not cover, in seq order. One
   * more read after the replay covers alarms pushed live before others committed earlier were pushed.
   */
  private async subscribeWithReplay(connection: Connection, principal: Principal, topic: string, key: string, sinceSeq: number, provider: ReplayProvider): Promise<void> {
    const gate = new ReplayGate(sinceSeq);
    this.subscribe(connection, key);
    connection.replays.set(key, gate);
    const send = (frame: object) => {
      if (!this.visible(connection, topic, (frame as { data?: unknown }).data)) return;
      const fresh = gate.replayed(frame);
      if (fresh) connection.message(fresh);
    };
    try {
      await provider(principal, topic, sinceSeq, send, connection.confinedTo);
      if (gate.holdsNewer && !connection.closed) await provider(principal, topic, gate.upTo, send, connection.confinedTo);
    } catch (error) {
      // A partial replay must not turn into a gap: the client resubscribes from the last seq it got.
      if (connection.replays.get(key) === gate) this.unsubscribe(connection, key);
      throw error;
    }
    // The gate stays: a push of an alarm the replay sent may still arrive, and is dropped there.
    for (const frame of gate.finish()) connection.message(frame);
  }

  /** Whether a message on `topic` is for this subscriber: a confined (plain) user gets only what is about them. */
  private visible(connection: Connection, topic: string, data: unknown): boolean {
    if (connection.confinedTo === undefined || !isConfinedTopic(topic)) return true;
    return (data as { user_id?: unknown } | null | undefined)?.user_id === connection.confinedTo;
  }

  private subscribe(connection: Connection, key: string): void {
    // Checked again here: several subscribe operations of one socket may be in flight together.
    if (!connection.subscriptions.has(key) && connection.subscriptions.size >= this.options.maxTopics) throw this.tooManyTopics(connection);
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
    connection.replays.delete(key);
  }

  private onClose(ws: WebSocket<SocketData>): void {
    const connection = ws.getUserData().connection;
    if (!connection) return;
    connection.closed = true;
    clearTimeout(connection.authTimer);
    clearTimeout(connection.expiryTimer);
    connection.releaseQuota?.();
    if (connection.unauthenticatedAddress !== undefined) this.releaseUnauthenticated(connection.unauthenticatedAddress);
    connection.unauthenticatedAddress = undefined;
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
    // A confined subscriber gets the group's positions of its own user: filtered once per topic and user.
    const confined = new Map<string, TopicPositions | undefined>();
    const confine = (key: string, group: TopicPositions, userId: string) => {
      const cacheKey = `${key}|${userId}`;
      if (!confined.has(cacheKey)) {
        const own = group.positions.filter((position) => position.record.userId === userId);
        confined.set(cacheKey, own.length > 0 ? new TopicPositions(group.topic, own) : undefined);
      }
      return confined.get(cacheKey);
    };
    for (const [key, { group, subscribers }] of groups) {
      const confinable = isConfinedTopic(group.topic);
      for (const connection of subscribers) {
        const mine = confinable && connection.confinedTo !== undefined ? confine(key, group, connection.confinedTo) : group;
        if (!mine) continue;
        const list = outgoing.get(connection);
        if (list) list.push(mine);
        else outgoing.set(connection, [mine]);
      }
    }
    for (const [connection, list] of outgoing) connection.sendPositions(list);
  }

  private levelHeightOf(record: PositionRecord): number | null {
    if (record.floorId === null || record.buildingId === null) return null;
    return this.services.registry.peek(record.buildingId)?.floors.get(record.floorId)?.levelHeight ?? null;
  }

  /** Whether any socket follows `topic` of the organization (so nothing is presented for nobody). */
  followed(organizationId: string, topic: string): boolean {
    return this.topics.has(topicKey(organizationId, topic));
  }

  /**
   * One bus message's geofence events and event-area contents of an organization, grouped by topic (in the
   * order they happened). Each group's frames are encoded once per format and shape (TopicEvents), a confined
   * subscriber gets the events about its own user (filtered once per topic and user), and each subscriber gets
   * all of its frames of the message in one write. These topics have no replay: nothing passes a ReplayGate.
   */
  publishEvents(organizationId: string, groups: readonly TopicEvents[]): void {
    const outgoing = new Map<Connection, TopicEvents[]>();
    for (const group of groups) {
      const subscribers = this.topics.get(topicKey(organizationId, group.topic));
      if (!subscribers) continue;
      const confinable = isConfinedTopic(group.topic);
      const confined = new Map<string, TopicEvents | undefined>();
      for (const connection of subscribers) {
        let mine: TopicEvents | undefined = group;
        const userId = connection.confinedTo;
        if (confinable && userId !== undefined) {
          if (!confined.has(userId)) {
            const own = group.events.filter((event) => event.userId === userId);
            confined.set(userId, own.length > 0 ? new TopicEvents(group.topic, group.ops, own) : undefined);
          }
          mine = confined.get(userId);
        }
        if (!mine) continue;
        const list = outgoing.get(connection);
        if (list) list.push(mine);
        else outgoing.set(connection, [mine]);
      }
    }
    for (const [connection, list] of outgoing) connection.sendEvents(list);
  }

  /**
   * Any other message to a topic (alarms); never coalesced. Encoded once per
   * format; a confined subscriber gets it only when it is about its user, a replaying one through its gate.
   */
  publish(organizationId: string, topic: string, op: string, data: unknown): void {
    const key = topicKey(organizationId, topic);
    const subscribers = this.topics.get(key);
    if (!subscribers) return;
    const frame = { op, topic, data };
    const encoded: Partial<Record<WireFormat, string | Buffer>> = {};
    for (const connection of subscribers) {
      if (!this.visible(connection, topic, data)) continue;
      const gate = connection.replays.get(key);
      if (gate && !gate.live(frame)) continue;
      connection.send((encoded[connection.format] ??= encode(connection.format, frame)));
    }
  }

  /**
   * Checks the `devices/{id}` subscriptions of an organization (every organization: undefined) again against
   * the devices' owners now (a phone handed to someone else, a device deleted): a subscription its socket may
   * no longer hold is dropped, and the socket told with an `unsubscribed` frame and the reason. Until then the
   * topic's frames are confined by user (CONFINED_TOPIC), so nothing of the new owner's leaks meanwhile.
   */
  async recheckDeviceSubscriptions(organizationId?: string): Promise<void> {
    const checks: Promise<void>[] = [];
    for (const [key, subscribers] of this.topics) {
      const split = key.indexOf('|');
      const organization = key.slice(0, split);
      const topic = key.slice(split + 1);
      if ((organizationId !== undefined && organization !== organizationId) || !isDeviceTopic(topic)) continue;
      for (const connection of subscribers) {
        const principal = connection.principal;
        if (!principal) continue;
        checks.push(
          authorizeTopic(topic, principal, this.services.registry, this.services.storage).catch((error: unknown) => {
            if (!(error instanceof AppError)) return this.services.logger.warn({ err: error, topic }, 're-checking a device subscription failed; it stays confined by user');
            if (connection.closed || !connection.subscriptions.has(key)) return;
            this.unsubscribe(connection, key);
            connection.message({ op: 'unsubscribed', topics: [topic], reason: error.message, status: toErrorBody(error).status });
          }),
        );
      }
    }
    await Promise.all(checks);
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
    this.accepting = false;
    this.revalidation.stop();
    this.backlogCeiling.stop();
    const deadline = Date.now() + graceMs;
    while ([...this.connections].some((c) => c.inFlight > 0) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    for (const connection of [...this.connections]) connection.close(WS_CLOSE.goingAway, 'server shutting down');
  }
}
