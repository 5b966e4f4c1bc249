import { describe, expect, it } from 'vitest';
import {
  AmbiguousCredentialsError,
  AppError,
  BadRequestError,
  ConflictError,
  ErrorCode,
  type FieldError,
  InvalidJsonError,
  JobFailedError,
  MethodNotAllowedError,
  NoRouteError,
  PayloadTooLargeError,
  RateLimitedError,
  TimeoutError,
  UnavailableError,
  UnsupportedMediaTypeError,
  errorHeaders,
  toErrorBody,
} from '../../shared/errors.js';

/**
 * The named error classes replaced `new AppError(ErrorCode.X, …)` at their call sites (issue 29): each must
 * answer exactly as the construction it replaced, since clients and the contract tests read status, code,
 * message, errors and headers.
 */
const M = 'What went wrong';
const retry = { 'retry-after': '5' };
const location = { location: '/api/v1/buildings/1/evacuations/e' };
const allowed = [
  { field: 'method', message: 'GET' },
  { field: 'method', message: 'POST' },
];
/** The named error, then what the replaced `new AppError(code, message, errors, headers)` was given, and the status. */
const cases: [AppError, ErrorCode, string, number, FieldError[]?, Record<string, string>?][] = [
  [new BadRequestError(M), ErrorCode.BadRequest, M, 400],
  [new InvalidJsonError(M), ErrorCode.InvalidJson, M, 400],
  [new NoRouteError('GET', '/api/v1/nothing'), ErrorCode.NotFound, 'No route for GET /api/v1/nothing', 404],
  [new MethodNotAllowedError('PATCH', ['GET', 'POST']), ErrorCode.MethodNotAllowed, 'Method PATCH is not allowed here', 405, allowed],
  [new PayloadTooLargeError(M), ErrorCode.PayloadTooLarge, M, 413],
  [new UnsupportedMediaTypeError(M), ErrorCode.UnsupportedMediaType, M, 415],
  [new AmbiguousCredentialsError(M), ErrorCode.AmbiguousCredentials, M, 409],
  [new JobFailedError(), ErrorCode.Internal, 'The job failed', 500],
  [new ConflictError(M, location), ErrorCode.Conflict, M, 409, undefined, location],
  [new RateLimitedError(M, retry), ErrorCode.RateLimited, M, 429, undefined, retry],
  [new TimeoutError(M), ErrorCode.Timeout, M, 504],
  [new UnavailableError(M, retry), ErrorCode.Unavailable, M, 503, undefined, retry],
];

describe('named error classes answer as the AppError they replaced', () => {
  for (const [named, code, message, status, errors, headers] of cases) {
    it(`${named.constructor.name}: ${status} ${code}`, () => {
      const adHoc = new AppError(code, message, errors, headers);
      expect(named).toBeInstanceOf(AppError);
      expect(named.status).toBe(status);
      expect(toErrorBody(named)).toEqual(toErrorBody(adHoc));
      expect(errorHeaders(named)).toEqual(headers ?? {});
    });
  }
});
