import { AppError, ErrorCode, toErrorBody, type ErrorBody } from '../errors.js';
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
}

/** A processor gets plain JSON data and returns a JSON-serialisable result; an AppError it throws reaches the caller. */
export type Processor = (data: any, context: ProcessorContext) => Promise<unknown>;
export type ProcessorRegistry = Readonly<Record<string, Processor>>;

export interface JobQueue {
  readonly kind: 'local' | 'bullmq';
  /** Enqueues and waits for the result; rejects with a 504 AppError after `timeoutMs`. */
  run<T = unknown>(job: JobRequest, timeoutMs: number): Promise<T>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export const jobTimeoutError = (timeoutMs: number) =>
  new AppError(ErrorCode.Timeout, `The job did not finish within ${Math.round(timeoutMs / 1000)} s`);

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
  return new AppError(ErrorCode.Internal, 'The job failed');
}
