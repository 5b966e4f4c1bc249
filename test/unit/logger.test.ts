import { describe, expect, it } from 'vitest';
import { createLogger } from '../../shared/logger.js';

/** The lines a logger writes, parsed. */
function capture(level: string, debugMessages?: string[]) {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger(
    level,
    { service: 'test' },
    { debugMessages, destination: { write: (line: string) => void lines.push(JSON.parse(line)) } },
  );
  return { logger, lines };
}

describe('logger', () => {
  it('logs the messages it is told to at debug instead of info (the demo hides per-request lines this way)', () => {
    const { logger, lines } = capture('info', ['request']);
    logger.info({ method: 'POST', path: '/api/v1/realtime/positions', status: 204 }, 'request');
    logger.info({ port: 8080 }, 'listening');
    expect(lines.map((line) => line.msg)).toEqual(['listening']);

    const verbose = capture('debug', ['request']);
    verbose.logger.info({ method: 'GET', path: '/health', status: 200 }, 'request');
    expect(verbose.lines).toEqual([expect.objectContaining({ msg: 'request', level: 20, method: 'GET', path: '/health', status: 200 })]);
  });

  it('keeps every message at its level by default, and still redacts credentials', () => {
    const { logger, lines } = capture('info');
    logger.info({ method: 'GET', authorization: 'Bearer secret' }, 'request');
    expect(lines).toEqual([expect.objectContaining({ msg: 'request', level: 30, authorization: '[redacted]', service: 'test' })]);
  });
});
