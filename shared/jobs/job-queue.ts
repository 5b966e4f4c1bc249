import { AppError, JobFailedError, toErrorBody, type ErrorBody, TimeoutError, UnavailableError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Storage } from '../storage/storage.js';

/**
 * Jobs are the slow, batch side of the product (reports, exports). The gateway hands a job over and waits
 * for its result; the same processors run in-process (no Redis) or on BullMQ workers (`npm run workers`).
 */
export interface JobRequest {
  /** Processor name, e.g. `report`. */
  name: string;
  /** Fairness key: one organization's jobs cannot starve another's. */
  organizationId: string;
  /** JSON-serialisable input of the processor. */
  data: unknown;
}

export interface ProcessorContext {
  storage: Storage;
  logger: Logger;
  /** Queues a follow-up job (a webhook retry); given by both drivers to the processors they run. */
  schedule?: (job: JobRequest, options?: ScheduleOptions) => Promise<void>;
}

export interface ScheduleOptions {
  /** Run no earlier than this many milliseconds from now. */
  delayMs?: number;
}

/**
 * The bounds of one job run: the instant its caller gives up (enqueue time + timeout, carried in the job so a
 * worker elsewhere knows it), and a signal raised then. A processor bounds its database work with them
 * (statement timeout, cancellation), so a job does not keep running after its 504.
 */
export interface JobLimits {
  /** Epoch milliseconds. */
  deadline: number;
  signal: AbortSignal;
}

/** A processor gets plain JSON data and returns a JSON-serialisable result; an AppError it throws reaches the caller. */
// biome-ignore lint/suspicious/noExplicitAny: each processor types its own job data; the queue carries them all
export type Processor = (data: any, context: ProcessorContext, limits: JobLimits) => Promise<unknown>;
export type ProcessorRegistry = Readonly<Record<string, Processor>>;

export interface JobQueue {
  readonly kind: 'local' | 'bullmq';
  /** Enqueues and waits for the result; rejects with a 504 AppError after `timeoutMs`. */
  run<T = unknown>(job: JobRequest, timeoutMs: number): Promise<T>;
  /** Jobs waiting and running (metrics); rejects when the queue cannot tell (Redis down). */
  stats(): Promise<{ waiting: number; active: number }>;
  /**
   * Queues a job nobody waits for (webhook deliveries), optionally delayed. At most once: work that must survive
   * a restart keeps its own durable record and schedules itself again from it.
   */
  schedule(job: JobRequest, options?: ScheduleOptions): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export const jobTimeoutError = (timeoutMs: number) => new TimeoutError(`The job did not finish within ${Math.round(timeoutMs / 1000)} s`);

/** The job queue cannot take jobs (Redis down): answered at once, with when to try again. */
export const jobsUnavailableError = (retryAfterSeconds = 5) =>
  new UnavailableError('Jobs cannot be queued right now (Redis is unreachable); try again later', {
    'retry-after': String(retryAfterSeconds),
  });

/** No worker has been alive for JOBS_WORKER_TTL_MS: a job would only wait in Redis for its caller's timeout. */
export const noWorkerError = (retryAfterSeconds = 5) =>
  new UnavailableError('No job worker is running right now (npm run workers); try again later', {
    'retry-after': String(retryAfterSeconds),
  });

/** Limits for a job that has until `deadline`; the signal fires then. */
export function limitsUntil(deadline: number): { limits: JobLimits; abort: (reason?: unknown) => void; dispose: () => void } {
  const controller = new AbortController();
  const remaining = deadline - Date.now();
  const timer = setTimeout(() => controller.abort(jobTimeoutError(remaining)), Math.max(0, remaining));
  timer.unref?.();
  return {
    limits: { deadline, signal: controller.signal },
    abort: (reason) => controller.abort(reason),
    dispose: () => clearTimeout(timer),
  };
}

/** Serialises a processor failure so it survives a trip through BullMQ's failedReason string. */
const marker = 'floorcast-error:';
export function encodeJobError(error: unknown): string {
  return marker + JSON.stringify(toErrorBody(error));
}

export function decodeJobError(reason: string | undefined): AppError {
  if (reason?.startsWith(marker)) {
    try {
      const body = JSON.parse(reason.slice(marker.length)) as ErrorBody;
      return new AppError(body.code, body.message, body.errors);
    } catch {
      // fall through: an unreadable reason is an internal error
    }
  }
  return new JobFailedError();
}
