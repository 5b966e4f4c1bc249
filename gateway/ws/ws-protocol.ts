import type { WebSocket } from 'uWebSockets.js';
import { z } from 'zod';
import {
  AppError,
  BadRequestError,
  InvalidJsonError,
  ForbiddenError,
  UnauthenticatedError,
  ConflictError,
  RateLimitedError,
} from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { Storage } from '../../shared/storage/index.js';
import type { RequestAuthenticator } from '../auth/authenticator.js';
import { can, confinedUserId } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import { mayHoldRefusedText, refuseTextPostgresRefuses } from '../http/pg-text.js';
import type { RateLimits } from '../http/rate-limit.js';
import type { PositionPipeline } from '../pipeline/position-pipeline.js';
import type { BuildingRegistry } from '../realtime/building-registry.js';
import { bearerExpiry } from './credential-check.js';
import { SOCKET_ROUTE, type SocketAdmission } from './socket-admission.js';
import type { SocketRevalidation } from './socket-revalidation.js';
import type { TopicInterest, TopicRegistry } from './topic-registry.js';
import { authorizeTopic, topicKey } from './topics.js';
import { WS_CLOSE, type Connection, type SocketData, type WsOptions } from './ws-connection.js';
import { decode } from './ws-codec.js';

/** What the WebSocket side uses of the gateway: authentication, uploads through the pipeline, topic checks. */
export interface WsDependencies {
  logger: Logger;
  authenticator: Pick<RequestAuthenticator, 'authenticate'>;
  pipeline: Pick<PositionPipeline, 'process'>;
  registry: BuildingRegistry;
  storage: Storage;
  rateLimits?: Pick<RateLimits, 'consume'>;
  /** The bus subscriptions the topics followed here need (gateway/realtime/position-interest.ts). */
  interest: TopicInterest;
}

/** An id the client chose, echoed in the reply: bounded, so echoing it can neither blow the stack nor the frame. */
const MAX_ID_LENGTH = 128;
const messageId = z.union([z.string().max(MAX_ID_LENGTH), z.number().finite()]);
type MessageId = z.infer<typeof messageId>;

const clientMessage = z.discriminatedUnion('op', [
  z.object({ op: z.literal('auth'), token: z.string().min(1), id: messageId.optional() }),
  z.object({
    op: z.literal('subscribe'),
    topics: z.array(z.string()).min(1).max(100),
    since_seq: z.number().int().min(0).optional(),
    id: messageId.optional(),
  }),
  z.object({ op: z.literal('unsubscribe'), topics: z.array(z.string()).min(1).max(100), id: messageId.optional() }),
  z.object({ op: z.literal('upload'), poses: z.array(z.unknown()).min(1).max(10_000), id: messageId.optional() }),
  z.object({ op: z.literal('ping'), id: messageId.optional() }),
]);
type ClientMessage = z.infer<typeof clientMessage>;

/**
 * The client message protocol, the one job of this file: decode a frame (JSON or msgpack), parse it as an
 * operation (auth, subscribe, unsubscribe, upload, ping), run it and answer it, or answer an error frame.
 * Topics are kept by topic-registry.ts; uploads go through the position pipeline.
 */
export class WsProtocol {
  constructor(
    private readonly services: WsDependencies,
    private readonly options: Pick<WsOptions, 'maxMessageBytes' | 'maxInFlight' | 'maxTopics'>,
    private readonly admission: SocketAdmission,
    private readonly topics: TopicRegistry,
    private readonly revalidation: SocketRevalidation,
  ) {}

  /** A socket is authenticated (on its upgrade, or by an `auth` message): it may subscribe and upload from now. */
  authenticated(connection: Connection, principal: Principal, id: MessageId | undefined, expiresAt: number | undefined): void {
    clearTimeout(connection.authTimer);
    if (connection.unauthenticatedAddress !== undefined) this.admission.releaseUnauthenticated(connection.unauthenticatedAddress);
    connection.unauthenticatedAddress = undefined;
    connection.principal = principal;
    connection.confinedTo = confinedUserId(principal);
    // From here the revocation feed closes it (closeWhere); a revocation it raced is caught by a check in storage.
    this.revalidation.authenticated(connection, expiresAt);
    if (connection.closed) return;
    connection.message({
      op: 'authenticated',
      id,
      user_id: principal.userId,
      organization_id: principal.organizationId,
      role: principal.role,
      permission: principal.permission,
    });
  }

  /**
   * The one boundary every message goes through: whatever the frame holds, and whatever its handling throws
   * (synchronously or not), the client gets an error frame and the connection stays consistent.
   */
  onMessage(ws: WebSocket<SocketData>, data: ArrayBuffer, isBinary: boolean): void {
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
        throw new InvalidJsonError(isBinary ? 'The frame is not valid msgpack' : 'The frame is not valid JSON');
      }
      const rawId = typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as { id?: unknown }).id : undefined;
      if (rawId !== undefined) {
        const checked = messageId.safeParse(rawId);
        if (!checked.success) throw new BadRequestError(`id must be a string of at most ${MAX_ID_LENGTH} characters or a finite number`);
        id = checked.data;
      }
      const parsed = clientMessage.safeParse(raw);
      if (!parsed.success) throw new BadRequestError('Unknown or malformed operation: auth, subscribe, unsubscribe, upload, ping');
      const message = parsed.data;
      // As on HTTP: strings PostgreSQL cannot store never get as far as a query (a topic, a device id).
      if (mayHoldRefusedStrings) refuseTextPostgresRefuses(message, undefined);
      if (message.op === 'ping') return connection.message({ op: 'pong', id });
      if (connection.inFlight >= this.options.maxInFlight) {
        throw new RateLimitedError(`At most ${this.options.maxInFlight} operations may be in flight on one socket: wait for their replies`);
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
      if (connection.principal) throw new ConflictError('Already authenticated');
      const headers: Record<string, string> = message.token.startsWith('fc_')
        ? { 'x-api-key': message.token }
        : { authorization: `Bearer ${message.token}` };
      const principal = await this.services.authenticator.authenticate(headers, SOCKET_ROUTE);
      if (connection.closed) return;
      if (connection.principal) throw new ConflictError('Already authenticated');
      connection.releaseQuota = await this.admission.admit(principal, connection.address);
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
      for (const topic of message.topics) this.topics.unsubscribe(connection, topicKey(principal.organizationId, topic));
      return connection.message({ op: 'unsubscribed', id: message.id, topics: message.topics });
    }
    const keys = message.topics.map((topic) => topicKey(principal.organizationId, topic));
    const fresh = new Set(keys.filter((key) => !connection.subscriptions.has(key)));
    if (connection.subscriptions.size + fresh.size > this.options.maxTopics) throw this.topics.tooManyTopics(connection);
    const accepted: string[] = [];
    for (const topic of message.topics) {
      try {
        await authorizeTopic(topic, principal, this.services.registry, this.services.storage);
        const key = topicKey(principal.organizationId, topic);
        const replay = message.since_seq !== undefined ? this.topics.replayFor(topic) : undefined;
        if (replay) await this.topics.subscribeWithReplay(connection, principal, topic, key, message.since_seq!, replay);
        else await this.topics.follow(connection, key);
        accepted.push(topic);
      } catch (error) {
        if (!(error instanceof AppError)) this.services.logger.error({ err: error, topic }, 'websocket subscription failed');
        connection.error(error, { id: message.id, topic });
      }
    }
    if (accepted.length > 0) connection.message({ op: 'subscribed', id: message.id, topics: accepted });
  }
}
