import { z } from 'zod';
import { HistoryService, MAX_JSON_ROWS } from '../history/history-service.js';
import { toWindow, windowQuery } from '../history/history-window.js';
import { idParam } from '../http/query-schemas.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';

const analyticsSchema = z.object({
  analytics: z.array(
    z.object({
      device_id: z.string().describe('The device identifier the app sends'),
      floor_id: z.number().int(),
      position: z.tuple([z.number(), z.number()]).describe('[x, y] metres on the floor'),
      yaw: z.number().describe('Radians'),
      time_sec: z.string().describe('Local time in the offset of `date`, e.g. 2026-05-01T10:00:00.000+02:00'),
    }),
  ),
});

/** Spec 4.3 and 2.10: stored position history, as JSON (indoor fixes) or as a streamed CSV (every fix). */
export function historyRoutes(services: GatewayServices) {
  const history = new HistoryService(services.storage, services.cartography);

  const rawPoseData = (path: string, hidden: boolean) =>
    defineRoute({
      method: 'GET',
      path,
      summary: `Indoor positions of a building over a range, ordered by time. At most ${MAX_JSON_ROWS.toLocaleString('en')} (422 beyond: narrow the range or use the CSV export)`,
      tags: ['positions'],
      auth: 'authenticated',
      action: 'positions:read',
      hidden,
      query: z
        .object({ building_id: idParam, ...windowQuery })
        .transform((query, context) => ({ buildingId: query.building_id, window: toWindow(query, context) })),
      response: analyticsSchema,
      handler: async ({ principal, query }) => ({ body: await history.analytics(principal, query.buildingId, query.window) }),
    });

  const exportCsv = defineRoute({
    method: 'GET',
    path: '/api/v1/real_time/export/:building_id',
    summary:
      'CSV of every position of a building over a range (device_id,time_sec,is_indoor,floor_id,position_x,position_y,yaw,lat,lng), streamed',
    tags: ['positions'],
    auth: 'authenticated',
    action: 'positions:read',
    params: z.object({ building_id: idParam }),
    query: z.object(windowQuery).transform((query, context) => toWindow(query, context)),
    rawResponseDoc: { contentType: 'text/csv', description: 'RFC 4180 CSV with a header row; times in the offset of `date`' },
    handler: async ({ principal, params, query }) => {
      const { stream, filename } = await history.exportCsv(principal, params.building_id, query);
      return { stream, contentType: 'text/csv; charset=utf-8', headers: { 'content-disposition': `attachment; filename="${filename}"` } };
    },
  });

  return [rawPoseData('/api/v1/real_time/analytics/raw_pose_data', false), rawPoseData('/api/v1/analytics/raw_pose_data', true), exportCsv];
}
