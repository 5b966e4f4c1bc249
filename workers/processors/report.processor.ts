import { ValidationError, fieldErrors } from '../../shared/errors.js';
import type { Processor } from '../../shared/jobs/index.js';
import { DEFAULT_MIN_PEOPLE, pseudonymizeRows } from '../../shared/reports/pseudonymize.js';
import { IDENTITY_FILTERS, reportParamSchemas, type ReportJob, type ReportResult } from '../../shared/reports/report-params.js';
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
  const params = parsed.data as Record<string, unknown>;
  const pseudonymous = params.pseudonymize === true || job.pseudonymous?.forced === true;
  if (pseudonymous) {
    // A pseudonymous report cannot be asked about someone named: the filter would name the person behind a pseudonym.
    const named = IDENTITY_FILTERS.filter((field) => params[field] !== undefined);
    if (named.length > 0)
      throw new ValidationError(named.map((field) => ({ field: `query.${field}`, message: 'not in a pseudonymous report' })));
  }
  const result = await reportQueries[job.report](storage, params, job.scope, limits);
  const rows = pseudonymous ? pseudonymizeRows(job.report, result, job.pseudonymous?.minPeople ?? DEFAULT_MIN_PEOPLE) : result.rows;
  const answer: ReportResult = {
    meta: result.meta,
    rows,
    statistics: {
      rows_read: result.rowsRead,
      rows_returned: rows.length,
      elapsed_ms: Math.round((performance.now() - started) * 100) / 100,
    },
  };
  // Written here, once, as the route sends it (report-output.ts): the rows never travel.
  return render ? renderReport(answer, render) : answer;
};
