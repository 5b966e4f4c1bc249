import { IsolationLevel } from '@mikro-orm/core';
import type { Storage } from '../storage/storage.js';

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

export type Execute = <T = Record<string, any>>(query: Sql) => Promise<T[]>;

/**
 * Runs a report's statements in one REPEATABLE READ transaction (they see the same positions) with two
 * settings of its own. `parallel_tuple_cost`: the reports group a day of positions into a few thousand
 * (device, window) groups, but the planner, blind to how many positions share a window, expects a tenth of
 * the rows and would rather run on one process than gather that many from workers (twice as slow on two
 * cores). `jit_inline_above_cost`: inlining PostgreSQL's functions into the compiled expressions costs each
 * process about 0.1 s and gains less than that here (optimisation, which does pay, stays on).
 */
export async function inReportTransaction<T>(storage: Storage, run: (execute: Execute) => Promise<T>): Promise<T> {
  return storage.em().transactional(
    async (em) => {
      const execute: Execute = async (query) => (await em.execute(query.text, query.params)) as never;
      await execute(sqlOf('set local parallel_tuple_cost = 0.01'));
      await execute(sqlOf('set local jit_inline_above_cost = -1'));
      return run(execute);
    },
    { isolationLevel: IsolationLevel.REPEATABLE_READ },
  );
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
  const [row] = await execute<{ first_ms: string | null }>(joinSql(['select floor(extract(epoch from min(p.ts)) * 1000)::int8 as first_ms from positions p where ', where]));
  return row?.first_ms ? new Date(Number(row.first_ms)).toISOString() : from;
}
