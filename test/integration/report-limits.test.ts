import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError, ErrorCode } from '../../shared/errors.js';
import type { JobLimits } from '../../shared/jobs/index.js';
import { createLogger } from '../../shared/logger.js';
import { renderedBody, renderText, type RenderedReport } from '../../shared/reports/report-output.js';
import type { ReportResult } from '../../shared/reports/report-params.js';
import { inBoundedTransaction, sqlOf } from '../../shared/reports/report-sql.js';
import { openStorage, type Storage } from '../../shared/storage/index.js';
import { reportProcessor } from '../../workers/processors/report.processor.js';
import { createTestEnvironment, driverLabel, serverDatabaseUrl, type TestEnvironment } from '../../testkit/test-environment.js';

const limits = (deadline: number, controller = new AbortController()): JobLimits => ({ deadline, signal: controller.signal });
const codeOf = (error: unknown) => (error instanceof AppError ? error.code : String(error));

/** A report stops in the database when its job's caller gives up, instead of running on after the 504. */
describe(`report statements are bounded by their job (${driverLabel})`, () => {
  let environment: TestEnvironment;
  let storage: Storage;
  const sleepers = async () =>
    Number(
      (
        await storage.execute<{ n: number }>(
          "select count(*)::int as n from pg_stat_activity where datname = current_database() and state = 'active' and query like 'select pg_sleep(30)%'",
        )
      )[0]!.n,
    );

  beforeAll(async () => {
    environment = await createTestEnvironment();
    storage = await openStorage(environment.config, createLogger('silent'));
  });
  afterAll(async () => {
    await storage?.close();
    await environment?.cleanup();
  });

  it('refuses to start a report whose caller already gave up', async () => {
    const controller = new AbortController();
    controller.abort();
    const job = {
      report: 'raw_data',
      params: { from_date: '2026-01-01T00:00:00Z', to_date: '2026-01-02T00:00:00Z' },
      scope: { organizationId: '00000000-0000-4000-8000-000000000000' },
    };
    const error = await reportProcessor(job, { storage, logger: createLogger('silent') }, limits(Date.now() + 60_000, controller)).catch(
      (e: unknown) => e,
    );
    expect(codeOf(error)).toBe(ErrorCode.Timeout);
  });

  it('hands back rows to a job that does not ask for the written answer (a gateway from before it), and refuses an unknown rendering', async () => {
    const context = { storage, logger: createLogger('silent') };
    const job = {
      report: 'visitors',
      params: { from_date: '2026-01-01T00:00:00Z', to_date: '2026-01-02T00:00:00Z', building_id: '1', group: 'hour' },
      scope: { organizationId: '00000000-0000-4000-8000-000000000000' },
    };
    const rows = (await reportProcessor(job, context, limits(Date.now() + 60_000))) as ReportResult;
    expect(rows.meta.map((column) => column.name)).toEqual(['group', 'visitors', 'devices', 'positions']);
    for (const format of ['json', 'csv'] as const) {
      const rendered = (await reportProcessor(
        { ...job, render: { format, deflate: true } },
        context,
        limits(Date.now() + 60_000),
      )) as RenderedReport;
      expect(Buffer.from(await renderedBody(rendered)).toString('utf8')).toBe(
        await renderText({ ...rows, statistics: rendered.statistics }, format),
      );
    }
    const refused = await reportProcessor({ ...job, render: { format: 'xml', deflate: true } }, context, limits(Date.now() + 60_000)).catch(
      (e: unknown) => e,
    );
    expect(codeOf(refused)).toBe(ErrorCode.ValidationFailed);
  });

  it('runs no further statement once the signal is raised', async () => {
    const controller = new AbortController();
    const ran: number[] = [];
    const error = await inBoundedTransaction(storage, limits(Date.now() + 60_000, controller), async (execute) => {
      ran.push((await execute<{ n: number }>(sqlOf('select 1 as n')))[0]!.n);
      controller.abort();
      ran.push((await execute<{ n: number }>(sqlOf('select 2 as n')))[0]!.n);
    }).catch((e: unknown) => e);
    expect(codeOf(error)).toBe(ErrorCode.Timeout);
    expect(ran).toEqual([1]);
  });

  // PGlite honours neither statement_timeout nor pg_cancel_backend (see docs/reliability.md, Bounded work).
  it.runIf(serverDatabaseUrl)('cancels a statement in the database at the job deadline (statement_timeout)', async () => {
    const error = await inBoundedTransaction(storage, limits(Date.now() + 300), (execute) => execute(sqlOf('select pg_sleep(30)'))).catch(
      (e: unknown) => e,
    );
    expect(codeOf(error)).toBe(ErrorCode.Timeout);
    expect(await sleepers()).toBe(0);
  });

  it.runIf(serverDatabaseUrl)(
    'cancels a running statement in the database when the caller gives up early (pg_cancel_backend)',
    async () => {
      const controller = new AbortController();
      const running = inBoundedTransaction(storage, limits(Date.now() + 60_000, controller), (execute) =>
        execute(sqlOf('select pg_sleep(30)')),
      ).catch((e: unknown) => e);
      await expect.poll(sleepers).toBe(1);
      controller.abort();
      expect(codeOf(await running)).toBe(ErrorCode.Timeout);
      expect(await sleepers()).toBe(0);
    },
  );
});
