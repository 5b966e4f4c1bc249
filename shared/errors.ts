import type { z } from 'zod';
import type { Logger } from './logger.js';
/**
 * The few errors the product raises on purpose. One mapper (`toErrorBody`) turns them into the flat JSON body
 * the official client reads, `{ status, code, message, errors? }`, with its HTTP status; over a WebSocket the same
 * body goes in an `error` frame (the socket's close codes are gateway/ws/ws-connection.ts `WS_CLOSE`).
 */
export enum ErrorCode {
  BadRequest = 'bad_request',
  InvalidJson = 'invalid_json',
  InvalidCredentials = 'invalid_credentials',
  /** One e-mail and password open accounts in several organizations: sign in with an API key instead. */
  AmbiguousCredentials = 'ambiguous_credentials',
  Unauthenticated = 'unauthenticated',
  TokenExpired = 'token_expired',
  Forbidden = 'forbidden',
  NotFound = 'not_found',
  MethodNotAllowed = 'method_not_allowed',
  Conflict = 'conflict',
  PayloadTooLarge = 'payload_too_large',
  UnsupportedMediaType = 'unsupported_media_type',
  ValidationFailed = 'validation_failed',
  RateLimited = 'rate_limited',
  Timeout = 'timeout',
  Unavailable = 'unavailable',
  Internal = 'internal_error',
}

const statusOf: Record<ErrorCode, number> = {
  [ErrorCode.BadRequest]: 400,
  [ErrorCode.InvalidJson]: 400,
  [ErrorCode.InvalidCredentials]: 401,
  [ErrorCode.AmbiguousCredentials]: 409,
  [ErrorCode.Unauthenticated]: 401,
  [ErrorCode.TokenExpired]: 401,
  [ErrorCode.Forbidden]: 403,
  [ErrorCode.NotFound]: 404,
  [ErrorCode.MethodNotAllowed]: 405,
  [ErrorCode.Conflict]: 409,
  [ErrorCode.PayloadTooLarge]: 413,
  [ErrorCode.UnsupportedMediaType]: 415,
  [ErrorCode.ValidationFailed]: 422,
  [ErrorCode.RateLimited]: 429,
  [ErrorCode.Timeout]: 504,
  [ErrorCode.Unavailable]: 503,
  [ErrorCode.Internal]: 500,
};

export interface FieldError {
  field: string;
  message: string;
}

/** Turns zod issues into the `errors: [{field, message}]` list of a 422; `prefix` names where they were found. */
export function fieldErrors(error: z.ZodError, prefix?: string): FieldError[] {
  return error.issues.map((issue) => ({
    field: [prefix, ...issue.path.map(String)].filter((part) => part !== undefined && part !== '').join('.') || (prefix ?? 'body'),
    message: issue.message,
  }));
}

export interface ErrorBody {
  status: number;
  code: ErrorCode;
  message: string;
  errors?: FieldError[];
}

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly errors?: FieldError[],
    /** Extra response headers, e.g. Retry-After. */
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'AppError';
    this.status = statusOf[code];
  }
}

/**
 * The base of a class whose code is fixed and whose message (and, for a 409, 429 or 503, its response headers:
 * Location, Retry-After) the caller gives.
 */
function withCode(code: ErrorCode) {
  return class extends AppError {
    constructor(message: string, headers?: Record<string, string>) {
      super(code, message, undefined, headers);
    }
  };
}

export class NotFoundError extends AppError {
  constructor(what = 'Resource') {
    super(ErrorCode.NotFound, `${what} not found`);
  }
}

export class ValidationError extends AppError {
  constructor(errors: FieldError[], message = 'Validation failed') {
    super(ErrorCode.ValidationFailed, message, errors);
  }
}

export class ForbiddenError extends AppError {
  constructor(message = 'You are not allowed to do this') {
    super(ErrorCode.Forbidden, message);
  }
}

export class UnauthenticatedError extends AppError {
  constructor(message = 'Authentication required', code: ErrorCode = ErrorCode.Unauthenticated) {
    super(code, message);
  }
}

/** The sign-in matched accounts in several organizations: 409, sign in with an API key instead. */
export class AmbiguousCredentialsError extends withCode(ErrorCode.AmbiguousCredentials) {}

/** A request or frame that is malformed outside any one field (a query flag, a frame's operation): 400. */
export class BadRequestError extends withCode(ErrorCode.BadRequest) {}

/** A body or frame that does not parse (JSON, or msgpack on a WebSocket): 400 `invalid_json`. */
export class InvalidJsonError extends withCode(ErrorCode.InvalidJson) {}

/** No route has this path: 404 naming the method and path. */
export class NoRouteError extends AppError {
  constructor(method: string, path: string) {
    super(ErrorCode.NotFound, `No route for ${method} ${path}`);
  }
}

/** A route has this path but not this method: 405, the methods it takes listed as `errors` of the field `method`. */
export class MethodNotAllowedError extends AppError {
  constructor(method: string, allow: readonly string[]) {
    super(
      ErrorCode.MethodNotAllowed,
      `Method ${method} is not allowed here`,
      allow.map((m) => ({ field: 'method', message: m })),
    );
  }
}

/** A body past its route's limit: 413. */
export class PayloadTooLargeError extends withCode(ErrorCode.PayloadTooLarge) {}

/** A body in a media type the route does not take (not multipart, not an image): 415. */
export class UnsupportedMediaTypeError extends withCode(ErrorCode.UnsupportedMediaType) {}

/** A job's processor failed with no AppError of its own: 500; the details are in the worker's log. */
export class JobFailedError extends AppError {
  constructor() {
    super(ErrorCode.Internal, 'The job failed');
  }
}

/** Seconds a client is asked to wait before retrying after a 503. */
export const OUTAGE_RETRY_AFTER_SECONDS = 5;

/** A write that contradicts the current state (a duplicate, a final state, one's own account): 409. */
export class ConflictError extends withCode(ErrorCode.Conflict) {}

/** Past a budget or a quota: 429, with Retry-After when the wait is known. */
export class RateLimitedError extends withCode(ErrorCode.RateLimited) {}

/** Work that did not finish in the time it had (a job, a report, a health probe). */
export class TimeoutError extends withCode(ErrorCode.Timeout) {}

/** Something this request needs is not there right now (shutting down, a dependency): 503, retry later. */
export class UnavailableError extends withCode(ErrorCode.Unavailable) {}
/**
 * A dependency (PostgreSQL, or the Redis behind the bus) cannot be reached or did not answer in time. Nothing
 * of the request is committed, so the client may retry it as is: 503 with Retry-After, never a 500.
 */
export class StorageUnavailableError extends AppError {
  constructor(
    message = 'The database is unavailable; retry later',
    readonly original?: unknown,
  ) {
    super(ErrorCode.Unavailable, message, undefined, { 'retry-after': String(OUTAGE_RETRY_AFTER_SECONDS) });
    this.name = 'StorageUnavailableError';
  }
}

/**
 * Detection of the upload's building is too far behind (its shard's backlog stayed at CLUSTER_MAX_BACKLOG
 * through CLUSTER_BACKLOG_WAIT_MS): nothing of the upload is stored, so the app sends it again after Retry-After.
 */
export class DetectionBehindError extends AppError {
  constructor(message = 'Detection of this building is behind; retry later') {
    super(ErrorCode.Unavailable, message, undefined, { 'retry-after': String(OUTAGE_RETRY_AFTER_SECONDS) });
    this.name = 'DetectionBehindError';
  }
}

/**
 * SQLSTATEs of an outage rather than of the request: connection exceptions (08), shutdown and restart (57P01-03),
 * too many connections (53300), statement timeout (57014).
 */
const OUTAGE_SQLSTATE = /^(08...|57P0[123]|53300|57014)$/;
const OUTAGE_NODE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
/** What pg, knex and ioredis (one Redis or a cluster) say when the connection is gone or never came (they set no code for these). */
const OUTAGE_MESSAGE =
  /Connection terminated|Timeout acquiring a connection|not queryable|timeout exceeded when trying to connect|Connection ended unexpectedly|Connection is closed|Reached the max retries per request|Cluster isn't ready|CLUSTERDOWN/i;

/**
 * Whether an error means "a dependency is down", whatever layer wrapped it: the driver's error, MikroORM's
 * DriverException (which copies the driver error's fields), an AggregateError of connection attempts, a cause chain.
 */
export function isOutageError(error: unknown, depth = 0): boolean {
  if (depth > 5 || typeof error !== 'object' || error === null) return false;
  if (error instanceof StorageUnavailableError) return true;
  if (error instanceof AppError) return false;
  const { code, name, message, cause, errors } = error as {
    code?: unknown;
    name?: unknown;
    message?: unknown;
    cause?: unknown;
    errors?: unknown;
  };
  if (typeof code === 'string' && (OUTAGE_SQLSTATE.test(code) || OUTAGE_NODE_CODES.has(code))) return true;
  if (name === 'KnexTimeoutError' || name === 'MaxRetriesPerRequestError') return true;
  if (typeof message === 'string' && OUTAGE_MESSAGE.test(message)) return true;
  if (Array.isArray(errors) && errors.some((inner) => isOutageError(inner, depth + 1))) return true;
  return cause !== undefined && isOutageError(cause, depth + 1);
}

/** The AppError an error answers as: itself, a 503 for an outage, undefined for a bug (500). */
export function asAppError(error: unknown): AppError | undefined {
  if (error instanceof AppError) return error;
  if (isOutageError(error)) return new StorageUnavailableError(undefined, error);
  return undefined;
}

/** Response headers an error asks for (Retry-After of a 503). */
export const errorHeaders = (error: unknown): Record<string, string> => asAppError(error)?.headers ?? {};

/** Anything thrown that is not an AppError (nor an outage) is an internal error; its details stay in the log. */
export function toErrorBody(thrown: unknown): ErrorBody {
  const error = asAppError(thrown);
  if (error) {
    const body: ErrorBody = { status: error.status, code: error.code, message: error.message };
    if (error.errors && error.errors.length > 0) body.errors = error.errors;
    return body;
  }
  return { status: 500, code: ErrorCode.Internal, message: 'Internal server error' };
}

export async function afterCommit(logger: Pick<Logger, 'error'>, step: string, run: () => unknown): Promise<void> {
  try {
    await run();
  } catch (error) {
    logger.error({ err: error, step }, 'post-commit step failed; the write is committed and answered as such');
  }
}
