import { pino, type Logger } from 'pino';

export type { Logger };

/** Structured JSON lines; credentials never reach a log line (see `redact`). */
export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { pid: process.pid, ...bindings },
    redact: {
      paths: ['password', '*.password', 'authorization', '*.authorization', 'token', '*.token', 'apikey', '*.apikey'],
      censor: '[redacted]',
    },
  });
}
