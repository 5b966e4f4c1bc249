import { z } from 'zod';
import { evacuationSchema, rollEntrySchema, presentEntry } from '../evacuations/presenters.js';
import { ROLL_STATUSES } from '../../shared/evacuations/roll-counts.js';
import { booleanParam, idParam, listParam, uuidParam } from '../http/query-schemas.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';
import { routeSchema } from './routing.route.js';
import { EVACUATION_REPORT_JOB, evacuationReportSchema, type EvacuationReportJob } from '../../shared/evacuations/evacuation-report.js';
import { renderedBody, type RenderedReport } from '../../shared/reports/report-output.js';

const evacuationParam = z.union([uuidParam, z.literal('current')]).describe('An evacuation id, or `current` for the active one');
const entryParam = z.string().min(1).max(300).describe('A roll entry: `user:{user id}` or `device:{identifier}`');

/**
 * Evacuations of a building (issue 31): declared and ended by admins and user managers, the roll read by whoever
 * sees everyone's positions.
 */
export function evacuationRoutes({ evacuations, routing, jobs, config }: GatewayServices) {
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/buildings/:id/evacuations',
      summary:
        'Declare an evacuation of a building: everyone present (a fix in the building within EVACUATION_PRESENCE_WINDOW_S, ' +
        'or whose last fix was inside) is on its roll. One active per building: 409 names the active one',
      tags: ['evacuations'],
      auth: 'authenticated',
      action: 'evacuations:manage',
      params: z.object({ id: idParam }),
      body: z
        .object({
          floor_ids: z
            .array(z.number().int().positive())
            .max(500)
            .optional()
            .describe('Only people on these floors (default: the whole building)'),
          note: z.string().max(2000).nullable().optional(),
          drill: z.boolean().optional().describe('A practice: the roll runs as for a real one, marked as a drill'),
        })
        .strict(),
      response: evacuationSchema,
      successStatus: 201,
      otherResponses: { 409: { description: 'The building has an active evacuation (its id in the message and the Location header)' } },
      handler: async ({ principal, params, body, audit }) => {
        const evacuation = await evacuations.declare(principal, params.id, body, audit);
        return {
          status: 201,
          body: await evacuations.view(evacuation),
          headers: { location: `/api/v1/buildings/${params.id}/evacuations/${evacuation.id}` },
        };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/buildings/:id/evacuations/:evacuation',
      summary:
        'An evacuation (`current`: the active one) with its roll and counts; the missing first by floor, with their last known place',
      tags: ['evacuations'],
      auth: 'authenticated',
      action: 'tracking:read-all',
      params: z.object({ id: idParam, evacuation: evacuationParam }),
      query: z.object({
        status: listParam(z.enum(ROLL_STATUSES))
          .optional()
          .describe(
            'Only entries of these statuses in `roll` and `arrivals` (comma-separated); `counts` and `missing` stay whole. ' +
              'A screen showing the counts, the missing and the arrivals at each assembly point asks for `safe` and skips the rest of the roll',
          ),
      }),
      response: evacuationSchema,
      handler: async ({ principal, params, query }) => ({
        body: await evacuations.view(await evacuations.find(principal, params.id, params.evacuation), query.status),
      }),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/buildings/:id/evacuations/:evacuation/roll/:entry/safe',
      summary: 'A warden marks a person on the roll safe (safe_manual, with who and the comment); 404 when they are not on the roll',
      tags: ['evacuations'],
      auth: 'authenticated',
      action: 'evacuations:manage',
      params: z.object({ id: idParam, evacuation: evacuationParam, entry: entryParam }),
      body: z.object({ comment: z.string().max(2000).nullable().optional() }).strict(),
      response: rollEntrySchema,
      handler: async ({ principal, params, body, audit }) => ({
        body: presentEntry(await evacuations.markSafe(principal, params.id, params.evacuation, params.entry, body.comment ?? null, audit)),
      }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/buildings/:id/evacuations/:evacuation/roll/:entry/route',
      summary:
        "The walking route for rescuers from the nearest assembly point (by route distance) to a person's last known place; " +
        '404 when the person is not on the roll, 422 when they have no known place on a floor of the building or nothing reaches it',
      tags: ['evacuations'],
      auth: 'authenticated',
      action: 'tracking:read-all',
      params: z.object({ id: idParam, evacuation: evacuationParam, entry: entryParam }),
      query: z.object({ accessible: booleanParam.optional().describe('Only accessible links: lifts and ramps, no stairs') }),
      response: z.object({
        entry: rollEntrySchema,
        assembly_point: z.object({ id: z.string(), name: z.string() }).describe('The assembly point the route starts from'),
        route: routeSchema,
      }),
      handler: async ({ principal, params, query }) => {
        const { entry, place, points } = await evacuations.lastPlace(principal, params.id, params.evacuation, params.entry);
        const { start, route } = await routing.routeFromNearest(principal, params.id, points, place, query.accessible ?? false);
        return { body: { entry, assembly_point: start, route } };
      },
    }),
    ...(['json', 'csv'] as const).map((format) =>
      defineRoute({
        method: 'GET',
        path: `/api/v1/buildings/:id/evacuations/:evacuation/report.${format}`,
        summary:
          format === 'json'
            ? 'The report of an evacuation (`current`: the active one): its timeline, the time to 50%, 90% and 100% of the roll ' +
              'accounted, arrivals per assembly point, who was marked safe by hand, who was last and who never was. Runs as a job'
            : 'The timeline of an evacuation as CSV: one row per event (started, each person accounted, arrivals, not found, ended)',
        tags: ['evacuations'],
        auth: 'authenticated',
        action: 'tracking:read-all',
        params: z.object({ id: idParam, evacuation: evacuationParam }),
        response: format === 'json' ? evacuationReportSchema : undefined,
        rawResponseDoc: format === 'csv' ? { contentType: 'text/csv', description: 'RFC 4180 CSV, the timeline' } : undefined,
        handler: async ({ principal, params }) => {
          const evacuation = await evacuations.find(principal, params.id, params.evacuation);
          const job: EvacuationReportJob = {
            organizationId: principal.organizationId,
            buildingId: params.id,
            evacuationId: evacuation.id,
            // The job writes the answer; deflated only when it comes back through Redis.
            render: { format, deflate: jobs.kind === 'bullmq' },
          };
          const rendered = await jobs.run<RenderedReport>(
            { name: EVACUATION_REPORT_JOB, organizationId: principal.organizationId, data: job },
            config.JOB_TIMEOUT_MS,
          );
          const body = await renderedBody(rendered);
          if (format === 'json') return { raw: body, contentType: 'application/json; charset=utf-8' };
          return {
            raw: body,
            contentType: 'text/csv; charset=utf-8',
            headers: { 'content-disposition': `attachment; filename="evacuation-${evacuation.id}.csv"` },
          };
        },
      }),
    ),
    defineRoute({
      method: 'POST',
      path: '/api/v1/buildings/:id/evacuations/:evacuation/end',
      summary: 'End an evacuation; whoever is still missing is recorded as not_found',
      tags: ['evacuations'],
      auth: 'authenticated',
      action: 'evacuations:manage',
      params: z.object({ id: idParam, evacuation: evacuationParam }),
      response: evacuationSchema,
      handler: async ({ principal, params, audit }) => ({
        body: await evacuations.view(await evacuations.end(principal, params.id, params.evacuation, audit)),
      }),
    }),
  ];
}
