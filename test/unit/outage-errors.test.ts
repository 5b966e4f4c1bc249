import { DriverException } from '@mikro-orm/core';
import { describe, expect, it } from 'vitest';
import { AppError, ErrorCode, StorageUnavailableError, errorHeaders, isOutageError, toErrorBody } from '../../shared/errors.js';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

describe('outage errors map to 503 unavailable with Retry-After, in one place', () => {
  const outages: [string, unknown][] = [
    ['connection refused', withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['server shutting down (57P01)', withCode('terminating connection due to administrator command', '57P01')],
    ['starting up (57P03)', withCode('the database system is starting up', '57P03')],
    ['statement timeout (57014)', withCode('canceling statement due to statement timeout', '57014')],
    ['connection failure (08006)', withCode('connection failure', '08006')],
    [
      'pool acquire timeout',
      Object.assign(new Error('Knex: Timeout acquiring a connection. The pool is probably full.'), { name: 'KnexTimeoutError' }),
    ],
    ['connection dropped mid-query', new Error('Connection terminated unexpectedly')],
    ['wrapped by MikroORM', new DriverException(withCode('terminating connection due to administrator command', '57P01'))],
    ['every address refused', new AggregateError([withCode('connect ECONNREFUSED ::1:5432', 'ECONNREFUSED')], '')],
    ['as a cause', new Error('report failed', { cause: withCode('x', 'ECONNRESET') })],
    ['the storage layer’s own class', new StorageUnavailableError()],
    ['a Redis Cluster that is gone', new Error("Cluster isn't ready and enableOfflineQueue options is false")],
    ['a Redis Cluster without a master for a slot', new Error('CLUSTERDOWN The cluster is down')],
  ];
  for (const [name, error] of outages) {
    it(`${name}: 503 unavailable, Retry-After`, () => {
      expect(isOutageError(error)).toBe(true);
      expect(toErrorBody(error)).toMatchObject({ status: 503, code: ErrorCode.Unavailable });
      expect(Number(errorHeaders(error)['retry-after'])).toBeGreaterThan(0);
    });
  }

  it('leaves request errors and bugs alone', () => {
    expect(toErrorBody(withCode('duplicate key', '23505'))).toMatchObject({ status: 500, code: ErrorCode.Internal });
    expect(toErrorBody(new TypeError('x is undefined'))).toMatchObject({ status: 500 });
    expect(toErrorBody(new AppError(ErrorCode.Conflict, 'taken'))).toMatchObject({ status: 409 });
    expect(errorHeaders(new TypeError('x'))).toEqual({});
    expect(isOutageError(null)).toBe(false);
  });
});
