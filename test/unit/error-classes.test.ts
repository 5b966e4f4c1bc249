import { describe, expect, it } from 'vitest';
import {
  AmbiguousCredentialsError,
  AppError,
  BadRequestError,
  ConflictError,
  ErrorCode,
  InvalidJsonError,
  JobFailedError,
  MethodNotAllowedError,
  NoRouteError,
  PayloadTooLargeError,
  UnsupportedMediaTypeError,
  errorHeaders,
  toErrorBody,
} from '../../shared/errors.js';

/**
 * The named error classes replaced `new AppError(ErrorCode.X, …)` at their call sites (issue 29): each must
 * answer exactly as the construction it replaced, since clients and the contract tests read status, code,
 * message, errors and headers.
 */
const cases: [string, AppError, AppError][] = [
  [
    'BadRequestError',
    new BadRequestError('events must be single or batched'),
    new AppError(ErrorCode.BadRequest, 'events must be single or batched'),
  ],
  [
    'InvalidJsonError',
    new InvalidJsonError('The frame is not valid JSON'),
    new AppError(ErrorCode.InvalidJson, 'The frame is not valid JSON'),
  ],
  ['NoRouteError', new NoRouteError('GET', '/api/v1/nothing'), new AppError(ErrorCode.NotFound, 'No route for GET /api/v1/nothing')],
  [
    'MethodNotAllowedError',
    new MethodNotAllowedError('PATCH', ['GET', 'POST']),
    new AppError(ErrorCode.MethodNotAllowed, 'Method PATCH is not allowed here', [
      { field: 'method', message: 'GET' },
      { field: 'method', message: 'POST' },
    ]),
  ],
  [
    'PayloadTooLargeError',
    new PayloadTooLargeError('The request body exceeds 10 bytes'),
    new AppError(ErrorCode.PayloadTooLarge, 'The request body exceeds 10 bytes'),
  ],
  [
    'UnsupportedMediaTypeError',
    new UnsupportedMediaTypeError('Send an image'),
    new AppError(ErrorCode.UnsupportedMediaType, 'Send an image'),
  ],
  [
    'AmbiguousCredentialsError',
    new AmbiguousCredentialsError('Use an API key'),
    new AppError(ErrorCode.AmbiguousCredentials, 'Use an API key'),
  ],
  ['JobFailedError', new JobFailedError(), new AppError(ErrorCode.Internal, 'The job failed')],
  [
    'ConflictError with headers',
    new ConflictError('Building 1 has an active evacuation: e', { location: '/api/v1/buildings/1/evacuations/e' }),
    new AppError(ErrorCode.Conflict, 'Building 1 has an active evacuation: e', undefined, {
      location: '/api/v1/buildings/1/evacuations/e',
    }),
  ],
];

describe('named error classes answer as the AppError they replaced', () => {
  it.each(cases)('%s', (_name, named, adHoc) => {
    expect(named).toBeInstanceOf(AppError);
    expect(toErrorBody(named)).toEqual(toErrorBody(adHoc));
    expect(errorHeaders(named)).toEqual(errorHeaders(adHoc));
  });

  it('statuses as clients see them', () => {
    expect(cases.map(([name, named]) => [name, named.status])).toEqual([
      ['BadRequestError', 400],
      ['InvalidJsonError', 400],
      ['NoRouteError', 404],
      ['MethodNotAllowedError', 405],
      ['PayloadTooLargeError', 413],
      ['UnsupportedMediaTypeError', 415],
      ['AmbiguousCredentialsError', 409],
      ['JobFailedError', 500],
      ['ConflictError with headers', 409],
    ]);
  });
});
