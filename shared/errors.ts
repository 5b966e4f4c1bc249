/**
 * The few errors the product raises on purpose. One mapper (`toErrorBody`) turns them into the flat JSON body
 * the official client reads, `{ status, code, message, errors? }`, into HTTP statuses and into WebSocket
 * close codes (4000 + status).
 */
export enum ErrorCode {
  BadRequest = 'bad_request',
  InvalidJson = 'invalid_json',
  InvalidCredentials = 'invalid_credentials',
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

/** Anything thrown that is not an AppError is an internal error; its details stay in the log. */
export function toErrorBody(error: unknown): ErrorBody {
  if (error instanceof AppError) {
    const body: ErrorBody = { status: error.status, code: error.code, message: error.message };
    if (error.errors && error.errors.length > 0) body.errors = error.errors;
    return body;
  }
  return { status: 500, code: ErrorCode.Internal, message: 'Internal server error' };
}
