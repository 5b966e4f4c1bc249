import { z } from 'zod';
import { HistoryService, MAX_JSON_ROWS } from '../history/history-service.js';
import { toWindow, windowQuery } from '../history/history-window.js';
import { DEFAULT_TRAIL_FIXES, MAX_TRAIL_FIXES, MAX_TRAIL_HOURS, TrailService } from '../history/trail-service.js';
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

const trailSchema = z.object({
  device_id: z.string(),
  building_id: z.number().int(),
  from: z.iso.datetime(),
  to: z.iso.datetime(),
  reorder_window_ms: z
    .number()
    .int()
    .describe('DETECTION_REORDER_WINDOW_SECONDS in ms: a fix that reached the server more than this after it was taken is late'),
  truncated: z.boolean().describe('More fixes than `limit` in the range: the newest `limit` are sent'),
  late_count: z.number().int().describe('How many of `data` are late'),
  data: z.array(
    z.object({
      ts: z.iso.datetime().describe('When the fix was taken (the device’s clock)'),
      received_at: z.iso.datetime().describe('When it first reached the server'),
      delay_ms: z.number().int().describe('received_at - ts; negative when the device’s clock runs ahead of the server’s'),
      late: z.boolean().describe('delay_ms over reorder_window_ms: uploaded from an offline buffer'),
      floor_id: z.number().int(),
      x: z.number().describe('Metres on the floor'),
      y: z.number().describe('Metres on the floor'),
    }),
  ),
});

const HOUR_MS = 3600_000;

/** `from`, `to` (default: now) and `device_id` of a trail, checked: `to` after `from`, at most MAX_TRAIL_HOURS apart. */
const trailQuery = z
  .object({
    device_id: z.string().trim().min(1).max(200).describe('The device identifier the app sends'),
    from: z.iso.datetime({ offset: true }).describe('Start (inclusive), ISO 8601 with an offset or Z'),
    to: z.iso
      .datetime({ offset: true })
      .optional()
      .describe(`End (exclusive), ISO 8601; default now; after from and at most ${MAX_TRAIL_HOURS} hours after it`),
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(MAX_TRAIL_FIXES)
      .default(DEFAULT_TRAIL_FIXES)
      .describe(`At most this many fixes, the newest of the range (default ${DEFAULT_TRAIL_FIXES}, at most ${MAX_TRAIL_FIXES})`),
  })
  .transform((query, context) => {
    const from = Date.parse(query.from);
    const to = query.to === undefined ? Date.now() : Date.parse(query.to);
    if (to <= from) context.addIssue({ code: 'custom', path: ['to'], message: 'must be after from' });
    else if (to - from > MAX_TRAIL_HOURS * HOUR_MS)
      context.addIssue({ code: 'custom', path: ['to'], message: `at most ${MAX_TRAIL_HOURS} hours after from` });
    return { deviceId: query.device_id, from, to, limit: query.limit };
  });

/** Spec 4.3 and 2.10: stored position history, as JSON (indoor fixes) or as a streamed CSV (every fix). */
export function historyRoutes(services: GatewayServices) {
  const history = new HistoryService(services.storage, services.cartography);
  const trails = new TrailService(services.storage, services.cartography, services.config.DETECTION_REORDER_WINDOW_SECONDS * 1000);

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

  /** A Floorcast extension (issue 30): the trail with each fix's arrival, so the late part of it can be told apart. */
  const trail = defineRoute({
    method: 'GET',
    path: '/api/v1/buildings/:building_id/trail',
    summary: `A device's indoor fixes in the building over a range (at most ${MAX_TRAIL_HOURS} h), ordered by fix time, each with when it reached the server and whether it came late (Floorcast extension)`,
    tags: ['positions'],
    auth: 'authenticated',
    action: 'positions:read',
    params: z.object({ building_id: idParam }),
    query: trailQuery,
    response: trailSchema,
    handler: async ({ principal, params, query }) => ({ body: await trails.read(principal, params.building_id, query) }),
  });

  return [
    rawPoseData('/api/v1/real_time/analytics/raw_pose_data', false),
    rawPoseData('/api/v1/analytics/raw_pose_data', true),
    exportCsv,
    trail,
  ];
}
