import { IsolationLevel } from '@mikro-orm/core';
import { AppError, TimeoutError } from '../errors.js';
import type { JobLimits } from '../jobs/job-queue.js';
import type { Storage } from '../storage/storage.js';

// biome-ignore lint/suspicious/noExplicitAny: report rows hold the columns named by the report's column list (report-columns.ts)
export type Params = Record<string, any>;

/** SQL text and its `?` parameters, kept together so that fragments compose in order. */
export interface Sql {
  text: string;
  params: unknown[];
}
export const sqlOf = (text: string, ...params: unknown[]): Sql => ({ text, params });
export function joinSql(parts: (Sql | string)[], separator = ''): Sql {
  const list = parts.map((part) => (typeof part === 'string' ? sqlOf(part) : part));
  return { text: list.map((part) => part.text).join(separator), params: list.flatMap((part) => part.params) };
}

// biome-ignore lint/suspicious/noExplicitAny: report rows hold the columns named by the report's column list (report-columns.ts)
export type Execute = <T = Record<string, any>>(query: Sql) => Promise<T[]>;

/** No bounds: for a report run outside a job (tests, tools). */
export const UNBOUNDED: JobLimits = { deadline: Number.POSITIVE_INFINITY, signal: new AbortController().signal };

const cancelled = () => new TimeoutError('The report was cancelled: it did not finish within the job timeout');

/** PostgreSQL's "canceling statement due to statement timeout / user request". */
const isCancellation = (error: unknown) =>
  (error as { code?: unknown })?.code === '57014' || /canceling statement due to/i.test(String((error as Error)?.message));

/**
 * Runs statements in one transaction bounded by the job's limits, so a report stops when its caller gives up
 * instead of running on after the 504: before each statement, `set local statement_timeout` to the time left
 * (the database cancels it then), and on the job's abort signal `pg_cancel_backend` of the transaction's
 * connection (a server only). PGlite runs in this process on one connection and honours neither (no timer
 * signals in WebAssembly): there the check between statements is all, and REPORTS_MAX_WINDOW_DAYS bounds the
 * work of each statement.
 */
export async function inBoundedTransaction<T>(
  storage: Storage,
  limits: JobLimits,
  run: (execute: Execute) => Promise<T>,
  options: { isolationLevel?: IsolationLevel; settings?: string[] } = {},
): Promise<T> {
  if (limits.signal.aborted || Date.now() >= limits.deadline) throw cancelled();
  const bounded = Number.isFinite(limits.deadline);
  let stopCancelling = () => {};
  try {
    return await storage.em().transactional(
      async (em) => {
        const raw = async <R>(text: string, params: unknown[] = []) => (await em.execute(text, params)) as R[];
        if (bounded && storage.kind === 'server') {
          const [row] = await raw<{ pid: number }>('select pg_backend_pid() as pid');
          const cancel = () => void storage.execute('select pg_cancel_backend(?)', [row!.pid]).catch(() => undefined);
          limits.signal.addEventListener('abort', cancel, { once: true });
          stopCancelling = () => limits.signal.removeEventListener('abort', cancel);
        }
        for (const setting of options.settings ?? []) await raw(`set local ${setting}`);
        const execute: Execute = async (query) => {
          if (limits.signal.aborted) throw cancelled();
          if (bounded) await raw(`set local statement_timeout = ${Math.max(1, Math.ceil(limits.deadline - Date.now()))}`);
          return raw(query.text, query.params) as never;
        };
        return run(execute);
      },
      options.isolationLevel ? { isolationLevel: options.isolationLevel } : {},
    );
  } catch (error) {
    if (isCancellation(error) || (limits.signal.aborted && !(error instanceof AppError))) throw cancelled();
    throw error;
  } finally {
    stopCancelling();
  }
}

/**
 * Runs a report's statements in one REPEATABLE READ transaction (they see the same positions) with two
 * settings of its own, bounded by the job's limits (see inBoundedTransaction). `parallel_tuple_cost`: the reports group a day of positions into a few thousand
 * (device, window) groups, but the planner, blind to how many positions share a window, expects a tenth of
 * the rows and would rather run on one process than gather that many from workers (twice as slow on two
 * cores). `jit_inline_above_cost`: inlining PostgreSQL's functions into the compiled expressions costs each
 * process about 0.1 s and gains less than that here (optimisation, which does pay, stays on).
 */
export function inReportTransaction<T>(storage: Storage, limits: JobLimits, run: (execute: Execute) => Promise<T>): Promise<T> {
  return inBoundedTransaction(storage, limits, run, {
    isolationLevel: IsolationLevel.REPEATABLE_READ,
    settings: ['parallel_tuple_cost = 0.01', 'jit_inline_above_cost = -1'],
  });
}

/** A session threshold in µs, rounded as `make_interval(secs => ...)` rounds it (rint: halves to even). */
export function intervalMicros(seconds: number): number {
  const us = seconds * 1e6;
  return Math.abs(us % 1) === 0.5 ? 2 * Math.round(us / 2) : Math.round(us);
}

/** Time in µs as JS numbers; they stay exact below 2^53 µs (285 years). */
const MAX_SPAN_US = Number.MAX_SAFE_INTEGER;

/**
 * The origin of a report's offsets: its start, unless the report spans more than JS numbers hold exactly in
 * µs; then its first position (an extra scan, for windows of centuries only).
 */
export async function originOf(execute: Execute, params: Params, where: Sql): Promise<string> {
  const from = params.from_date as string;
  if ((Date.parse(params.to_date) - Date.parse(from)) * 1000 < MAX_SPAN_US) return from;
  const [row] = await execute<{ first_ms: string | null }>(
    joinSql(['select floor(extract(epoch from min(p.ts)) * 1000)::int8 as first_ms from positions p where ', where]),
  );
  return row?.first_ms ? new Date(Number(row.first_ms)).toISOString() : from;
}
