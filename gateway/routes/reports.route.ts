import { z } from 'zod';
import { ValidationError } from '../../shared/errors.js';
import { isRendered, renderedBody, renderReport, type RenderedReport } from '../../shared/reports/report-output.js';
import { REPORT_COLUMNS } from '../../shared/reports/report-columns.js';
import {
  REPORT_NAMES,
  reportParamSchemas,
  windowProblems,
  type ReportColumn,
  type ReportJob,
  type ReportName,
  type ReportResult,
} from '../../shared/reports/report-params.js';
import { defineRoute, type RouteDefinition } from '../http/route.js';
import type { GatewayServices } from '../services.js';
import { reportsPseudonymous } from '../privacy/organization-privacy.js';

const PURPOSES: Record<ReportName, string> = {
  geofencing_stay_time:
    'Time each device stayed in each geofence, per day or hour of entry (computed from positions against the current geometry)',
  geofencing_sessions_matches: 'Each stay of a device in a geofence: entry, exit, duration',
  visitors: 'Unique visitors (users, or devices without one) per month, day or hour',
  positioning_time: 'Time devices spent in the building: min, average, median, 90th percentile and max per group',
  heatmap: 'Geohash (precision 10) cells of a floor with their centre and a weight (distinct users)',
  raw_data: 'Positions with their geospatial and geometric information',
  user_positions: 'A trajectory: positions in order with a session mark (what the official client reads as {data})',
};

const CELLS: Record<ReportColumn['type'], z.ZodType> = {
  string: z.string(),
  integer: z.number().int(),
  number: z.number(),
  boolean: z.boolean(),
  datetime: z
    .string()
    .describe('In UTC an ISO 8601 instant (2023-05-20T16:59:02Z), in another time_zone its wall-clock time (2023-05-20 18:59:02)'),
};

/** The JSON answer of one report, its rows typed by the report's own columns (the list its query returns). */
const resultSchema = (name: ReportName) => {
  const columns = REPORT_COLUMNS[name];
  const cell = (column: ReportColumn) => (column.nullable ? CELLS[column.type].nullable() : CELLS[column.type]);
  const types = Object.keys(CELLS) as ReportColumn['type'][];
  return z.object({
    data: z.array(z.object(Object.fromEntries(columns.map((column) => [column.name, cell(column)])))),
    meta: z.array(z.object({ name: z.enum(columns.map((column) => column.name)), type: z.enum(types), nullable: z.boolean() })),
    statistics: z.object({ rows_read: z.number().int(), rows_returned: z.number().int(), elapsed_ms: z.number() }),
  });
};

/**
 * Spec 4.4: `GET /api/v1/reports/<name>.json|csv`. The parameters are checked here (422 at once); the report
 * itself runs as a job (BullMQ workers with Redis, the in-process runner otherwise) and the request waits
 * for it, up to JOB_TIMEOUT_MS; the job's statements are cancelled in the database then. With Redis down the
 * request answers 503 at once (or after JOBS_ENQUEUE_TIMEOUT_MS).
 */
export function reportRoutes(services: GatewayServices): RouteDefinition[] {
  const forcedPseudonymous = (organizationId: string) => reportsPseudonymous(services.storage, organizationId);
  return REPORT_NAMES.flatMap((name) =>
    (['json', 'csv'] as const).map((format) =>
      defineRoute({
        method: 'GET',
        path: `/api/v1/reports/${name}.${format}`,
        summary: `${PURPOSES[name]} (${format.toUpperCase()})`,
        tags: ['reports'],
        auth: 'authenticated',
        action: 'reports:read',
        query: reportParamSchemas[name] as z.ZodType,
        response: format === 'json' ? resultSchema(name) : undefined,
        rawResponseDoc:
          format === 'csv' ? { contentType: 'text/csv', description: 'RFC 4180 CSV; statistics in the X-Db-Statistics header' } : undefined,
        handler: async ({ principal, query, rawQuery }) => {
          // Checked here, before any job: the window bounds the report's work (422 beyond REPORTS_MAX_WINDOW_DAYS).
          const problems = windowProblems(query as { from_date: string; to_date: string }, services.config.REPORTS_MAX_WINDOW_DAYS);
          if (problems.length > 0) throw new ValidationError(problems);
          const job: ReportJob = {
            report: name,
            // The raw query, not the parsed one: the worker validates it again with the same schema.
            params: rawQuery,
            scope: { organizationId: principal.organizationId, ...(principal.role === 'user' ? { onlyUserId: principal.userId } : {}) },
            // The job writes the answer; deflated only when it comes back through Redis.
            render: { format, deflate: services.jobs.kind === 'bullmq' },
            // The organization can make every report pseudonymous for everyone but its admins.
            pseudonymous: {
              forced: principal.role !== 'admin' && (await forcedPseudonymous(principal.organizationId)),
              minPeople: services.config.REPORTS_PSEUDONYMOUS_MIN_PEOPLE,
            },
          };
          const result = await services.jobs.run<ReportResult | RenderedReport>(
            { name: 'report', organizationId: principal.organizationId, data: job },
            services.config.JOB_TIMEOUT_MS,
          );
          // A worker from before rendering hands back rows: written here with the same code.
          const rendered = isRendered(result) ? result : await renderReport(result, { format, deflate: false });
          const body = await renderedBody(rendered);
          if (format === 'json') return { raw: body, contentType: 'application/json; charset=utf-8' };
          return {
            stream: slices(body),
            contentType: 'text/csv; charset=utf-8',
            headers: {
              'x-db-statistics': JSON.stringify(rendered.statistics),
              'content-disposition': `attachment; filename="${name}.csv"`,
            },
          };
        },
      }),
    ),
  );
}

/** A CSV document in pieces of 64 KiB, written with backpressure as csvChunks' were; cut as bytes, never inside a character's UTF-16 pair. */
async function* slices(body: Buffer | string, size = 64 * 1024): AsyncGenerator<Buffer> {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}
