import { z } from 'zod';
import { booleanParam, idParam, listParam } from '../http/query-schemas.js';
import { defineRoute } from '../http/route.js';
import type { Endpoint } from '../routing/routing-service.js';
import type { GatewayServices } from '../services.js';

const metres = z.coerce.number().finite().min(-100_000).max(100_000);
const geoPoint = z.object({ x: z.number(), y: z.number(), lat: z.number(), lng: z.number() });

const routeQuery = z
  .object({
    from_floor_id: idParam.optional(),
    from_x: metres.optional(),
    from_y: metres.optional(),
    from_device_id: z.string().min(1).max(200).optional().describe("Start at this device's live position"),
    to_floor_id: idParam.optional(),
    to_x: metres.optional(),
    to_y: metres.optional(),
    to_poi_id: idParam.optional().describe('End at this indoor POI'),
    to_alarm_id: z.uuid().optional().describe("End at this alarm's position"),
    accessible: booleanParam.optional().describe('Only accessible links: lifts and ramps, no stairs'),
    avoid_geofence_ids: listParam(z.uuid()).optional().describe('Geofences the route must not enter'),
  })
  .superRefine((query, context) => {
    const exactlyOne = (end: 'from' | 'to', forms: Record<string, boolean>) => {
      const given = Object.entries(forms).filter(([, present]) => present);
      if (given.length !== 1)
        context.addIssue({ code: 'custom', path: [end], message: `give exactly one of: ${Object.keys(forms).join('; ')}` });
    };
    const point = (end: 'from' | 'to') => {
      const parts = [query[`${end}_floor_id`], query[`${end}_x`], query[`${end}_y`]];
      if (parts.some((part) => part !== undefined) && parts.some((part) => part === undefined)) {
        context.addIssue({ code: 'custom', path: [end], message: `${end}_floor_id, ${end}_x and ${end}_y go together` });
      }
      return parts.every((part) => part !== undefined);
    };
    exactlyOne('from', { 'from_floor_id, from_x, from_y': point('from'), from_device_id: query.from_device_id !== undefined });
    exactlyOne('to', {
      'to_floor_id, to_x, to_y': point('to'),
      to_poi_id: query.to_poi_id !== undefined,
      to_alarm_id: query.to_alarm_id !== undefined,
    });
  });

export const routeSchema = z.object({
  building_id: z.number().int(),
  distance_m: z.number().describe('Along the links, from the snapped start to the snapped end'),
  duration_s: z.number().int().describe('Walking estimate: 1.2 m/s on a floor, plus the climb or the lift'),
  accessible: z.boolean(),
  from: geoPoint.extend({
    floor_id: z.number().int(),
    snap_distance_m: z.number().describe('From the requested point to the nearest link'),
  }),
  to: geoPoint.extend({ floor_id: z.number().int(), snap_distance_m: z.number() }),
  legs: z
    .array(z.object({ floor_id: z.number().int(), distance_m: z.number(), points: z.array(geoPoint) }))
    .describe('One per floor visited, in order'),
  steps: z.array(
    z.object({
      instruction: z.string(),
      distance_m: z.number(),
      floor_id: z.number().int(),
      floor_change: z
        .object({
          from_floor_id: z.number().int(),
          to_floor_id: z.number().int(),
          direction: z.enum(['up', 'down']),
          via: z.enum(['lift', 'stairs', 'escalator', 'ramp']),
        })
        .optional(),
    }),
  ),
});

const nearestSchema = z.object({
  building_id: z.number().int(),
  floor_id: z.number().int(),
  x: z.number(),
  y: z.number(),
  snap_distance_m: z.number(),
  data: z.array(
    z.object({
      device_id: z.string(),
      user_id: z.string().nullable(),
      floor_id: z.number().int(),
      x: z.number(),
      y: z.number(),
      time: z.string(),
      route_distance_m: z.number().describe('Walking distance along the links to the point (snap included)'),
      snap_distance_m: z.number(),
      straight_distance_m: z.number(),
    }),
  ),
});

/** Routes on a building's navigation graph (A*), and live devices ranked by route distance for dispatch. */
export function routingRoutes(services: GatewayServices) {
  const { routing, config } = services;
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/buildings/:building_id/route',
      summary:
        'Shortest route on the navigation graph between two points (or a device, a POI, an alarm); 422 naming the end that cannot be reached',
      tags: ['routing'],
      auth: 'authenticated',
      action: 'cartography:read',
      params: z.object({ building_id: idParam }),
      query: routeQuery,
      response: routeSchema,
      handler: async ({ principal, params, query }) => {
        const from: Endpoint =
          query.from_device_id !== undefined
            ? { deviceId: query.from_device_id }
            : { floorId: query.from_floor_id, x: query.from_x, y: query.from_y };
        const to: Endpoint =
          query.to_poi_id !== undefined
            ? { poiId: query.to_poi_id }
            : query.to_alarm_id !== undefined
              ? { alarmId: query.to_alarm_id }
              : { floorId: query.to_floor_id, x: query.to_x, y: query.to_y };
        return {
          body: await routing.route(principal, params.building_id, {
            from,
            to,
            accessible: query.accessible ?? false,
            avoidGeofenceIds: query.avoid_geofence_ids ?? [],
          }),
        };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/buildings/:building_id/nearest_devices',
      summary: 'Live devices of the building ranked by route distance (not straight line) to a point, nearest first',
      tags: ['routing'],
      auth: 'authenticated',
      action: 'positions:read',
      params: z.object({ building_id: idParam }),
      query: z.object({
        floor_id: idParam,
        x: metres,
        y: metres,
        limit: z.coerce.number().int().min(1).max(1000).default(10),
        accessible: booleanParam.optional(),
        group_id: z.uuid().optional().describe('Only devices whose user is in this group (e.g. the responders)'),
      }),
      response: nearestSchema,
      handler: async ({ principal, params, query }) => ({
        body: await routing.nearestDevices(
          principal,
          params.building_id,
          { floorId: query.floor_id, x: query.x, y: query.y },
          {
            limit: query.limit,
            accessible: query.accessible ?? false,
            maxAgeSeconds: config.LIVE_POSITION_TTL_SECONDS,
            groupId: query.group_id,
          },
        ),
      }),
    }),
  ];
}
