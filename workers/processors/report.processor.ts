import { ValidationError, fieldErrors } from '../../shared/errors.js';
import type { Processor } from '../../shared/jobs/index.js';
import { reportParamSchemas, type ReportJob, type ReportResult } from '../../shared/reports/report-params.js';
import { renderReport, type RenderedReport } from '../../shared/reports/report-output.js';
import { reportQueries } from '../../shared/reports/report-queries.js';

/**
 * Runs one report in the database and returns its rows with their column metadata and statistics. The
 * gateway already validated the parameters; they are parsed again here because a job is a message from
 * elsewhere, and a bad one is refused (unrecoverable) rather than run. Its statements are bounded by the job's
 * limits: cancelled in the database when the caller gives up. Asked to (`render`), it hands back the answer
 * written as JSON or CSV rather than the rows (report-output.ts).
 */
export const reportProcessor: Processor = async (job: ReportJob, { storage }, limits): Promise<ReportResult | RenderedReport> => {
  const started = performance.now();
  const schema = reportParamSchemas[job.report];
  if (!schema) throw new ValidationError([{ field: 'report', message: `unknown report ${String(job.report)}` }]);
  const parsed = schema.safeParse(job.params);
  if (!parsed.success) throw new ValidationError(fieldErrors(parsed.error));
  const render = job.render;
  if (render !== undefined && ((render.format !== 'json' && render.format !== 'csv') || typeof render.deflate !== 'boolean')) {
    throw new ValidationError([{ field: 'render', message: 'format json or csv, deflate true or false' }]);
  }
  const result = await reportQueries[job.report](storage, parsed.data as Record<string, unknown>, job.scope, limits);
  const answer: ReportResult = {
    meta: result.meta,
    rows: result.rows,
    statistics: {
      rows_read: result.rowsRead,
      rows_returned: result.rows.length,
      elapsed_ms: Math.round((performance.now() - started) * 100) / 100,
    },
  };
  // Written here, once, as the route sends it (report-output.ts): the rows never travel.
  return render ? renderReport(answer, render) : answer;
};
