import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import type { z } from 'zod';
import {
  AppError,
  ErrorCode,
  InvalidJsonError,
  MethodNotAllowedError,
  NoRouteError,
  PayloadTooLargeError,
  ValidationError,
  afterCommit,
  errorHeaders,
  fieldErrors,
  toErrorBody,
  UnavailableError,
} from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { Principal } from '../auth/principal.js';
import type { ClientAddresses } from './client-address.js';
import type { RequestLimit } from './rate-limit.js';
import { mayHoldRefusedText, refuseTextPostgresRefuses } from './pg-text.js';
import { parseQuery } from './query.js';
import type { HttpMethod, Reply, RequestContext, RouteDefinition } from './route.js';
import { Router, normalisePath } from './router.js';
import { AuditRecorder } from '../audit/audit-log.js';
import { statusLine } from './status-text.js';

/** Resolves the caller from the request headers; throws 401/403 AppErrors. */
export type Authenticator = (headers: Record<string, string>, route: RouteDefinition) => Promise<Principal>;

export interface HttpServerOptions {
  maxBodyBytes: number;
  logger: Logger;
  authenticate: Authenticator;
  /** Counts an authenticated request against its credential's budget; returns RateLimit headers, throws 429. */
  rateLimit?: (principal: Principal, route: RouteDefinition) => Promise<RequestLimit>;
  /** Who the client is: the peer, or behind a trusted reverse proxy the address it forwards (TRUSTED_PROXIES). */
  clientAddresses?: ClientAddresses;
  /** Called when a known caller is refused (403), for the audit log; its failure never changes the answer. */
  onRefused?: (principal: Principal, request: { method: string; route: string; address: string }, error: AppError) => Promise<void>;
}

const CORS_HEADERS: Record<string, string> = {
  // Credentials travel in headers, never cookies, so any origin may call the API (the JS client runs in browsers).
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS',
  'access-control-allow-headers': 'Authorization, Content-Type, Accept-Language, X-API-EMAIL, X-API-KEY',
  'access-control-expose-headers': 'X-Db-Statistics, Retry-After, RateLimit, RateLimit-Policy, Content-Disposition, ETag',
  'access-control-max-age': '600',
};

function validate<T>(schema: z.ZodType<T> | undefined, value: unknown, where: string): T {
  if (!schema) return value as T;
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ValidationError(fieldErrors(parsed.error, where === 'body' ? undefined : where));
  return parsed.data;
}

/** A request in flight: the uWS response plus what was copied out of the request before any await. */
class Exchange {
  aborted = false;
  finished = false;
  /** The caller passed authentication and its budget, so its body is being read. */
  admitted = false;
  status = 0;
  /** Resolves a stream waiting for the socket to drain (also on abort, so it never hangs). */
  private writable?: () => void;
  /** `head`: a HEAD request, answered as its GET would be (status, headers, Content-Length) with no body. */
  constructor(
    readonly res: HttpResponse,
    readonly head: boolean,
  ) {}

  /** Whether the body (if it was held back) was let in. */
  bodyAdmitted(paused: boolean): boolean {
    return !paused || this.admitted;
  }

  abort(): void {
    this.aborted = true;
    this.writable?.();
  }

  /**
   * Streams a body: headers first, then each chunk, waiting for uWS to drain whenever a write is buffered.
   * A failure half-way cannot change the status any more: the connection is closed so the client sees a
   * truncated response rather than a complete-looking one.
   */
  async stream(status: number, headers: Record<string, string>, chunks: AsyncIterable<string | Buffer>): Promise<void> {
    if (this.head) return this.streamLength(status, headers, chunks);
    if (!this.begin(status)) return;
    this.res.cork(() => this.writeHead(status, headers));
    const iterator = chunks[Symbol.asyncIterator]();
    try {
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
        if (this.aborted) break;
        let written = true;
        this.res.cork(() => {
          written = this.res.write(next.value);
        });
        if (!written && !this.aborted) {
          await new Promise<void>((resolve) => {
            this.writable = resolve;
            this.res.onWritable(() => {
              // Resolved on the next turn: a promise settled inside this native callback may not run its
              // continuation until some unrelated Node callback happens, stalling an idle gateway's stream.
              setImmediate(resolve);
              return true;
            });
          });
          this.writable = undefined;
        }
      }
      if (!this.aborted) this.res.cork(() => this.res.end());
    } catch (error) {
      if (!this.aborted) this.res.close();
      throw error;
    } finally {
      await iterator.return?.();
    }
  }

  /**
   * HEAD of a streamed body: the chunks are counted, not sent, so the answer announces the length GET's body
   * would have (GET sends it chunked, without one).
   */
  private async streamLength(status: number, headers: Record<string, string>, chunks: AsyncIterable<string | Buffer>): Promise<void> {
    let length = 0;
    for await (const chunk of chunks) {
      if (this.aborted) return;
      length += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.byteLength;
    }
    if (!this.begin(status)) return;
    this.res.cork(() => {
      this.writeHead(status, headers);
      this.res.endWithoutBody(length);
    });
  }

  /** Claims the response; false when the client went away or it was already answered. */
  private begin(status: number): boolean {
    if (this.aborted || this.finished) return false;
    this.finished = true;
    this.status = status;
    return true;
  }

  /** Status line, CORS headers, then the response's own; call inside a cork. */
  private writeHead(status: number, headers: Record<string, string>): void {
    this.res.writeStatus(statusLine(status));
    for (const name in CORS_HEADERS) this.res.writeHeader(name, CORS_HEADERS[name]!);
    for (const name in headers) this.res.writeHeader(name, headers[name]!);
  }

  /** Writes a whole response, corked, unless the client went away. */
  send(
    status: number,
    headers: Record<string, string>,
    body: string | Buffer | undefined,
    closeConnection = false,
    representationLength?: number,
  ): void {
    if (!this.begin(status)) return;
    this.res.cork(() => {
      this.writeHead(status, headers);
      // endWithoutBody() only with a known length: given none, this uWS build announces a bogus Content-Length
      // and poisons keep-alive.
      if (representationLength !== undefined && body === undefined) this.res.endWithoutBody(representationLength, closeConnection);
      else if (this.head && body !== undefined && status !== 204) this.res.endWithoutBody(Buffer.byteLength(body), closeConnection);
      else this.res.end(status === 204 || body === undefined ? undefined : body, closeConnection);
    });
  }

  sendError(error: unknown, closeConnection = false): void {
    const body = toErrorBody(error);
    const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
    Object.assign(headers, errorHeaders(error)); // Retry-After of a 503, including a database outage that is no AppError yet
    if (error instanceof AppError && error.code === ErrorCode.MethodNotAllowed && error.errors) {
      headers.allow = error.errors.map((e) => e.message).join(', ');
      delete body.errors;
    }
    this.send(body.status, headers, JSON.stringify(body), closeConnection);
  }

  sendReply(reply: Reply): void {
    const status = reply.status ?? (reply.body === undefined && reply.raw === undefined ? 204 : 200);
    const headers: Record<string, string> = { ...reply.headers };
    let payload: string | Buffer | undefined;
    if (reply.raw !== undefined) {
      payload = reply.raw;
      headers['content-type'] = reply.contentType ?? 'application/octet-stream';
    } else if (reply.body !== undefined) {
      payload = JSON.stringify(reply.body);
      headers['content-type'] = reply.contentType ?? 'application/json; charset=utf-8';
    }
    this.send(status, headers, payload, false, reply.representationLength);
  }
}

/**
 * The REST side of the gateway on uWebSockets.js: one catch-all handler that copies the request, reads a
 * size-capped body, matches a route, authenticates, validates and answers with the flat JSON error body on
 * any failure. It also counts requests in flight so SIGTERM can drain them.
 */
export class HttpServer {
  readonly router = new Router();
  private inFlight = 0;
  private drainWaiters: (() => void)[] = [];
  private accepting = true;

  constructor(private readonly options: HttpServerOptions) {}

  // biome-ignore lint/suspicious/noExplicitAny: the route table holds routes of every parameter type, each checked against its own schemas
  add(...routes: RouteDefinition<any, any, any>[]): void {
    for (const route of routes) this.router.add(route);
  }

  /** Registers the catch-all handler; WebSocket routes are registered on the same app separately. */
  attach(app: TemplatedApp): void {
    app.any('/*', (res, req) => this.onRequest(res, req));
  }

  /** After this, new requests get 503 while those in flight finish. */
  stopAccepting(): void {
    this.accepting = false;
  }

  /** Resolves once no request is in flight, or after `timeoutMs`. */
  drain(timeoutMs: number): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.drainWaiters.push(() => (clearTimeout(timer), resolve()));
    });
  }

  private onRequest(res: HttpResponse, req: HttpRequest): void {
    const started = performance.now();
    // Everything needed from `req` is copied now: it is invalid after this function returns.
    const method = req.getCaseSensitiveMethod().toUpperCase();
    const exchange = new Exchange(res, method === 'HEAD');
    const path = req.getUrl();
    const queryString = req.getQuery() ?? '';
    const headers: Record<string, string> = {};
    req.forEach((name, value) => {
      headers[name] = value;
    });
    const peer = Buffer.from(res.getRemoteAddressAsText()).toString();
    const remoteAddress = this.options.clientAddresses?.resolve(peer, headers['x-forwarded-for']) ?? peer;
    this.inFlight += 1;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      this.inFlight -= 1;
      if (this.inFlight === 0) for (const waiter of this.drainWaiters.splice(0)) waiter();
      this.options.logger.info(
        {
          method,
          path,
          status: exchange.aborted && !exchange.finished ? 499 : exchange.status,
          ms: Math.round((performance.now() - started) * 100) / 100,
        },
        'request',
      );
    };
    res.onAborted(() => {
      exchange.abort();
      finish();
    });

    if (method === 'OPTIONS') {
      exchange.send(204, {}, undefined);
      return finish();
    }
    if (!this.accepting) {
      exchange.sendError(new UnavailableError('The server is shutting down'), true);
      return finish();
    }
    const match = this.router.match(method, path);
    if (match.kind !== 'found') {
      exchange.sendError(match.kind === 'not_found' ? new NoRouteError(method, path) : new MethodNotAllowedError(method, match.allow));
      // The body, if any, is never read: close so it does not linger on a keep-alive connection.
      return void (this.readBody(exchange, headers, 0).catch(() => undefined), finish());
    }
    const route = match.route;
    const limit = route.maxBodyBytes ?? this.options.maxBodyBytes;
    const hasBody = route.method !== 'GET' && route.method !== 'DELETE';
    // onData must be registered before the first await; the body's stream stays paused until the caller is
    // known and within budget, so an unauthenticated request costs no upload (L8).
    const body = hasBody ? this.readBody(exchange, headers, limit) : Promise.resolve(Buffer.alloc(0));
    body.catch(() => undefined); // a 413 may arrive while authentication is still running; it is awaited below
    const paused = hasBody && route.auth !== 'public';
    if (paused) res.pause();
    const admitted = () => {
      if (paused && !exchange.aborted) res.resume();
    };
    this.handle(exchange, route, match.params, { method: route.method, path, queryString, headers, remoteAddress }, body, admitted)
      .catch(async (error) => {
        const refused =
          error instanceof AppError && error.code === ErrorCode.Forbidden
            ? (error as AppError & { principal?: Principal }).principal
            : undefined;
        if (refused)
          await this.options
            .onRefused?.(refused, { method, route: normalisePath(route.path), address: remoteAddress }, error)
            .catch(() => undefined);
        if (!(error instanceof AppError)) this.options.logger.error({ err: error, method, path }, 'unhandled error');
        // A body never resumed (refused before it was read) is closed off rather than left on the connection.
        exchange.sendError(
          error,
          (error instanceof AppError && error.code === ErrorCode.PayloadTooLarge) || !exchange.bodyAdmitted(paused),
        );
      })
      .finally(finish);
  }

  private async handle(
    exchange: Exchange,
    route: RouteDefinition,
    rawParams: Record<string, string>,
    request: { method: HttpMethod; path: string; queryString: string; headers: Record<string, string>; remoteAddress: string },
    bodyPromise: Promise<Buffer>,
    admitted: () => void,
  ): Promise<void> {
    const principal =
      route.auth === 'public' ? (undefined as unknown as Principal) : await this.options.authenticate(request.headers, route);
    const limit = principal ? await this.options.rateLimit?.(principal, route) : undefined;
    exchange.admitted = true;
    admitted();
    const rawBody = await bodyPromise;
    // Strings PostgreSQL would refuse (NUL, lone surrogates) are refused here, for every route, before any schema.
    refuseTextPostgresRefuses(rawParams, 'path');
    const params = validate(route.params, rawParams, 'path');
    const rawQuery = parseQuery(request.queryString);
    refuseTextPostgresRefuses(rawQuery, 'query');
    const query = validate(route.query, rawQuery, 'query');
    let body: unknown;
    if (route.bodyKind === 'raw') body = rawBody;
    else if (rawBody.length > 0) {
      const text = rawBody.toString('utf8');
      try {
        body = JSON.parse(text);
      } catch {
        throw new InvalidJsonError('The request body is not valid JSON');
      }
      // Only an escape can put such a string in JSON: the walk runs only when the text holds one.
      if (mayHoldRefusedText(text)) refuseTextPostgresRefuses(body, undefined);
    }
    if (route.body && route.bodyKind !== 'raw') body = validate(route.body, body, 'body');
    await limit?.afterBody(body);
    const context: RequestContext = {
      method: request.method,
      path: request.path,
      params,
      query,
      rawQuery,
      body,
      headers: request.headers,
      rawBody,
      remoteAddress: request.remoteAddress,
      principal,
      audit: new AuditRecorder(principal, request.method, normalisePath(route.path), request.remoteAddress),
      afterCommit: (step, run) => afterCommit(this.options.logger, step, run),
    };
    const reply = await Promise.resolve()
      .then(() => route.handler(context))
      .catch((error: unknown) => {
        // A refusal by the handler itself: the caller is known, for the audit of refusals.
        if (error instanceof AppError && error.code === ErrorCode.Forbidden && principal) Object.assign(error, { principal });
        throw error;
      });
    if (
      principal &&
      (route.write ?? route.method !== 'GET') &&
      !route.auditExempt &&
      (reply.status ?? 200) < 300 &&
      context.audit.recorded === 0
    ) {
      this.options.logger.error({ method: request.method, route: route.path }, 'a successful write left no audit entry');
    }
    if (reply.stream) {
      const headers = { 'content-type': reply.contentType ?? 'application/octet-stream', ...reply.headers };
      await exchange
        .stream(reply.status ?? 200, headers, reply.stream)
        .catch((error) => this.options.logger.error({ err: error, path: request.path }, 'stream failed'));
    } else exchange.sendReply(limit ? { ...reply, headers: { ...limit.headers, ...reply.headers } } : reply);
  }

  /** Collects the body up to `limit` bytes; past it, rejects with 413 (the connection is then closed). */
  private readBody(exchange: Exchange, headers: Record<string, string>, limit: number): Promise<Buffer> {
    const declared = Number(headers['content-length'] ?? NaN);
    return new Promise((resolve, reject) => {
      const tooLarge = () => new PayloadTooLargeError(`The request body exceeds ${limit} bytes`);
      if (Number.isFinite(declared) && declared > limit) {
        reject(tooLarge());
        exchange.res.onData(() => undefined);
        return;
      }
      // One buffer of the declared length, so the body is copied once (uWS reuses a chunk's memory after its
      // callback); without a length, or past it, the buffer doubles.
      let body = Buffer.allocUnsafe(Number.isSafeInteger(declared) && declared >= 0 ? declared : Math.min(limit, 1024));
      let received = 0;
      let failed = false;
      exchange.res.onData((chunk, isLast) => {
        if (failed) return;
        const start = received;
        received += chunk.byteLength;
        if (received > limit) {
          failed = true;
          return reject(tooLarge());
        }
        if (received > body.length) {
          const grown = Buffer.allocUnsafe(Math.min(limit, Math.max(received, body.length * 2)));
          body.copy(grown, 0, 0, start);
          body = grown;
        }
        body.set(new Uint8Array(chunk), start);
        if (isLast) resolve(body.subarray(0, received));
      });
    });
  }
}
