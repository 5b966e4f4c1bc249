/**
 * Whether a failed commit failed because of the database (or the way to it) rather than because of its rows.
 * Such a failure would fail every batch alike, so retrying the batches apart would only multiply the load on a
 * database that is already in trouble. Anything else (a bad value, a missing partition, a constraint) is taken
 * as caused by some row, and the writer retries the batches apart to find whose.
 */
export function failsEveryBatch(error: unknown): boolean {
  for (
    let current = error, depth = 0;
    current && typeof current === 'object' && depth < 4;
    current = (current as { cause?: unknown }).cause, depth++
  ) {
    const { code, name, message } = current as { code?: unknown; name?: unknown; message?: unknown };
    if (typeof code === 'string') {
      if (NODE_CONNECTION_CODES.has(code) || code === 'unavailable') return true;
      // SQLSTATE classes: 08 connection exception, 53 insufficient resources, 57 operator intervention
      // (admin shutdown, cannot connect now, statement timeout), 58 system error.
      if (/^(08|53|57|58)[0-9A-Z]{3}$/.test(code)) return true;
    }
    if (typeof name === 'string' && CONNECTION_ERROR_NAMES.has(name)) return true;
    if (typeof message === 'string' && CONNECTION_MESSAGES.test(message)) return true;
  }
  return false;
}

const NODE_CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);
/** MikroORM's and knex's wrappers for a connection that could not be had. */
const CONNECTION_ERROR_NAMES = new Set(['ConnectionException', 'KnexTimeoutError']);
const CONNECTION_MESSAGES = /Connection terminated|connection.*(closed|ended)|PGlite is closed|Timeout acquiring a connection/i;
