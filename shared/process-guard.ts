import type { EventEmitter } from 'node:events';
import type { Logger } from './logger.js';

export type Fault = 'unhandledRejection' | 'uncaughtException';
export type Verdict = 'survive' | 'exit';

/**
 * A start stopped for a reason the operator can fix (a port in use, a missing setting): the entry points print
 * its message alone, naming the variable, without a stack trace that buries it.
 */
export class StartError extends Error {
  override name = 'StartError';
}

/** What an entry point prints when its start failed: the message of a StartError, the stack of anything else. */
export const describeStartFailure = (error: unknown): string =>
  error instanceof StartError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error);

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

/** How long past SHUTDOWN_GRACE_SECONDS a stop may take (closing the bus, the job queue, storage) before the process exits anyway. */
export const SHUTDOWN_MARGIN_MS = 5000;

export interface StopOptions {
  /** The whole stop's bound: past it the process exits 1 whatever is still closing (a Redis or PostgreSQL that went away). */
  deadlineMs: number;
  /** Tests inject these; a real process uses process.exit and the process's own signals. */
  exit?: (code: number) => void;
  target?: EventEmitter;
}

/**
 * The entry points' graceful stop: the first SIGTERM or SIGINT runs `close` once, then exits 0, or 1 when the
 * close failed or outlived `deadlineMs` (a supervisor must never have to SIGKILL). A second signal exits 1 at
 * once: whoever sends it has stopped waiting. Returns whether a stop has begun (a start still under way can give up).
 */
export function stopOnSignals(logger: Logger, what: string, close: () => Promise<void>, options: StopOptions): () => boolean {
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const target = options.target ?? process;
  let stopping = false;
  const end = (code: number) => {
    try {
      logger.flush?.();
    } catch {
      // the exit status still says how it ended
    }
    exit(code);
  };
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, `second ${signal}: exiting now, without waiting for ${what} to finish stopping`);
      return end(1);
    }
    stopping = true;
    logger.info({ signal, deadlineMs: options.deadlineMs }, `stopping ${what}`);
    const timer = setTimeout(() => {
      logger.error({ deadlineMs: options.deadlineMs }, `${what} did not stop within ${options.deadlineMs} ms: exiting anyway`);
      end(1);
    }, options.deadlineMs);
    timer.unref?.();
    close().then(
      () => (clearTimeout(timer), end(0)),
      (error) => {
        clearTimeout(timer);
        logger.error({ err: error }, 'unclean stop');
        end(1);
      },
    );
  };
  target.on('SIGTERM', () => stop('SIGTERM'));
  target.on('SIGINT', () => stop('SIGINT'));
  return () => stopping;
}

/**
 * One step of a stop, bounded: a step that waits on a server that went away (Redis, PostgreSQL) is logged and
 * left behind after `ms`, so the steps after it still run. Never rejects.
 */
export async function boundedStep(logger: Logger, step: string, work: () => Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), ms)));
  try {
    const outcome = await Promise.race([work().then(() => 'done' as const), timedOut]);
    if (outcome === 'timeout') logger.warn({ step, ms }, `stop: ${step} did not finish within ${ms} ms; going on without it`);
  } catch (error) {
    logger.warn({ err: error, step }, `stop: ${step} failed; going on`);
  } finally {
    clearTimeout(timer);
  }
}
