import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

export interface LoggerOptions {
  /** Messages logged at info that are logged at debug instead (the demo keeps its summary on screen this way). */
  debugMessages?: readonly string[];
  /** Where lines go (standard output by default). */
  destination?: DestinationStream;
}

/** Structured JSON lines; credentials never reach a log line (see `redact`). */
export function createLogger(level: string, bindings: Record<string, unknown> = {}, options: LoggerOptions = {}): Logger {
  const demoted = new Set(options.debugMessages ?? []);
  return pino(
    {
      level,
      base: { pid: process.pid, ...bindings },
      redact: {
        paths: ['password', '*.password', 'authorization', '*.authorization', 'token', '*.token', 'apikey', '*.apikey'],
        censor: '[redacted]',
      },
      hooks:
        demoted.size === 0
          ? {}
          : {
              logMethod(args, method, levelValue) {
                const message = args.at(-1);
                if (levelValue === pino.levels.values.info && typeof message === 'string' && demoted.has(message))
                  return (this.debug as (...a: unknown[]) => void)(...args);
                return method.apply(this, args);
              },
            },
    },
    options.destination,
  );
}
