import { ValidationError, fieldErrors } from '../../shared/errors.js';
import type { Processor } from '../../shared/jobs/index.js';
import { reportParamSchemas, type ReportJob, type ReportResult } from '../../shared/reports/report-params.js';
import { reportQueries } from '../../shared/reports/report-queries.js';

/**
 * Runs one report in the database and returns its rows with their column metadata and statistics. The
 * gateway already validated the parameters; they are parsed again here because a job is a message from
 * elsewhere, and a bad one is refused (unrecoverable) rather than run. Its statements are bounded by the job's
 * limits: cancelled in the database when the caller gives up.
 */
export const reportProcessor: Processor = async (job: ReportJob, { storage }, limits): Promise<ReportResult> => {
  const started = performance.now();
  const schema = reportParamSchemas[job.report];
  if (!schema) throw new ValidationError([{ field: 'report', message: `unknown report ${String(job.report)}` }]);
  const parsed = schema.safeParse(job.params);
  if (!parsed.success) throw new ValidationError(fieldErrors(parsed.error));
  const result = await reportQueries[job.report](storage, parsed.data as Record<string, unknown>, job.scope, limits);
  return {
    meta: result.meta,
    rows: result.rows,
    statistics: { rows_read: result.rowsRead, rows_returned: result.rows.length, elapsed_ms: Math.round((performance.now() - started) * 100) / 100 },
  };
};
