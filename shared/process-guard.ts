import type { EventEmitter } from 'node:events';
import type { Logger } from './logger.js';

export type Fault = 'unhandledRejection' | 'uncaughtException';
export type Verdict = 'survive' | 'exit';

/** Exit status of a process stopped by a fault it could not survive (EX_SOFTWARE): a supervisor restarts it. */
export const FAULT_EXIT_CODE = 70;

/**
 * Whether the process may carry on after a fault. A rejection nobody awaited ends only the operation that
 * failed: its stack has unwound and no code was interrupted half-way, so the process survives (unless the
 * error says it is fatal). An uncaught exception interrupted synchronous code at an arbitrary point: shared
 * state may be half-updated, so the process exits and is restarted.
 */
export function verdictOf(fault: Fault, error: unknown): Verdict {
  if (fault === 'uncaughtException') return 'exit';
  if (typeof error === 'object' && error !== null && (error as { fatal?: unknown }).fatal === true) return 'exit';
  return 'survive';
}

export interface ProcessGuardOptions {
  logger: Logger;
  /** How long flushing may take before the process exits anyway. */
  flushTimeoutMs?: number;
  /** Tests inject these; a real process uses process.exit and the process's own events. */
  exit?: (code: number) => void;
  target?: EventEmitter;
}

/**
 * The process-level handler of faults that escaped every other boundary: each is logged with its count;
 * survivable ones leave the process running, unsurvivable ones flush what can be flushed (the gateway's
 * graceful close: sockets told to reconnect, positions written) and exit with FAULT_EXIT_CODE.
 * Nothing is swallowed silently.
 */
export class ProcessGuard {
  readonly counts: Record<Fault, number> = { unhandledRejection: 0, uncaughtException: 0 };
  private flush?: () => Promise<void>;
  private exiting = false;
  private readonly listeners: Record<Fault, (error: unknown) => void>;

  constructor(private readonly options: ProcessGuardOptions) {
    this.listeners = {
      unhandledRejection: (reason) => this.handle('unhandledRejection', reason),
      uncaughtException: (error) => this.handle('uncaughtException', error),
    };
  }

  /** Installs the guard on the process (or `options.target`). */
  static install(options: ProcessGuardOptions): ProcessGuard {
    const guard = new ProcessGuard(options);
    const target = options.target ?? process;
    target.on('unhandledRejection', guard.listeners.unhandledRejection);
    target.on('uncaughtException', guard.listeners.uncaughtException);
    return guard;
  }

  uninstall(): void {
    const target = this.options.target ?? process;
    target.off('unhandledRejection', this.listeners.unhandledRejection);
    target.off('uncaughtException', this.listeners.uncaughtException);
  }

  /** What to flush before a fatal exit; set once there is something to flush (the gateway has started). */
  flushWith(flush: () => Promise<void>): void {
    this.flush = flush;
  }

  handle(fault: Fault, error: unknown): Verdict {
    this.counts[fault] += 1;
    const verdict = verdictOf(fault, error);
    const fields = { err: error, fault, count: this.counts[fault], verdict };
    if (verdict === 'survive') {
      this.options.logger.error(fields, `${fault}: survived`);
      return verdict;
    }
    this.options.logger.fatal(fields, `${fault}: exiting with ${FAULT_EXIT_CODE} so that a supervisor restarts the process`);
    if (this.exiting) {
      // A second fatal fault while flushing: the flush itself cannot be trusted any more.
      this.exit();
      return verdict;
    }
    this.exiting = true;
    void this.flushThenExit();
    return verdict;
  }

  private async flushThenExit(): Promise<void> {
    if (this.flush) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.options.flushTimeoutMs ?? 10_000)));
      try {
        await Promise.race([this.flush(), timeout]);
      } catch (error) {
        this.options.logger.error({ err: error }, 'flush before exit failed');
      } finally {
        clearTimeout(timer);
      }
    }
    this.exit();
  }

  private exit(): void {
    try {
      this.options.logger.flush?.(); // pino buffers: the fatal line must not be lost with the process
    } catch {
      // the line may be lost; the exit status still says why
    }
    (this.options.exit ?? ((code: number) => process.exit(code)))(FAULT_EXIT_CODE);
  }
}

/**
 * The entry points' graceful stop: the first SIGTERM or SIGINT runs `close` once, then exits 0, or 1 when the
 * close failed. Returns whether a stop has begun (a start still under way can give up).
 */
export function stopOnSignals(logger: Logger, what: string, close: () => Promise<void>): () => boolean {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, `stopping ${what}`);
    close().then(
      () => process.exit(0),
      (error) => {
        logger.error({ err: error }, 'unclean stop');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  return () => stopping;
}
