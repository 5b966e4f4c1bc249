import { z } from 'zod';
import { DeviceSchema, UserSchema } from '../../shared/storage/entities/index.js';
import { confinedUserId } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import { booleanParam, idParam, listParam } from '../http/query-schemas.js';
import { defineRoute } from '../http/route.js';
import type { PositionFeature } from '../realtime/geojson.js';
import { poseSchema, uploadPosesSchema } from '../realtime/pose-schema.js';
import type { GatewayServices } from '../services.js';

export const featureSchema = z.object({
  type: z.literal('Feature'),
  id: z.string().describe('The device identifier'),
  geometry: z.object({
    type: z.literal('Point'),
    coordinates: z.tuple([z.number(), z.number()]).describe('[latitude, longitude], as the official client reads them'),
  }),
  properties: z.object({
    device_id: z.string(),
    user_id: z.string().nullable(),
    building_id: z.number().int().nullable(),
    floor_id: z.number().int().nullable(),
    level_height: z.number().nullable(),
    indoor: z.boolean(),
    time: z.string(),
    yaw: z.number(),
    accuracy: z.number().nullable().describe('Metres'),
    local_coordinates: z.tuple([z.number(), z.number()]).nullable().describe('[x, y] metres on the floor'),
    tracked_now: z
      .boolean()
      .optional()
      .describe(
        'REST views: false while the person is outside their tracking window (nothing newer comes until it opens: not a lost device). Absent from pushed positions, which are tracked',
      ),
  }),
});
const featureCollectionSchema = z.object({ type: z.literal('FeatureCollection'), features: z.array(featureSchema) });
const deviceInfoSchema = z.object({
  id: z.string().describe('The device identifier (the feature id)'),
  uuid: z.uuid(),
  code: z.string(),
  name: z.string(),
  organization_id: z.uuid(),
  user_id: z.uuid().nullable(),
  group_ids: z.array(z.uuid()),
  building_ids: z.array(z.number().int()),
  created_at: z.string(),
  updated_at: z.string(),
});

/**
 * The users whose live positions a caller may see, narrowed by the users they asked for: a plain user sees only
 * their own devices (asking for a colleague gets nothing), others see what they asked for.
 */
function visibleUserIds(principal: Principal, requested: readonly string[] | undefined): readonly string[] | undefined {
  const confined = confinedUserId(principal);
  if (confined === undefined) return requested;
  return requested === undefined || requested.includes(confined) ? [confined] : [];
}

/** Spec 4.3: position upload and the real-time views, served from this gateway's live state. */
export function realtimeRoutes(services: GatewayServices) {
  const { pipeline, realtime, storage, trackingWindows } = services;
  /** Each feature says whether its person is tracked now (outside their window, their last position is not news). */
  const withTracking = async (organizationId: string, features: PositionFeature[]): Promise<PositionFeature[]> => {
    const userIds = new Set(features.map((feature) => feature.properties.user_id).filter((id): id is string => id !== null));
    const untracked = userIds.size === 0 ? new Set<string>() : await trackingWindows.untrackedNow(organizationId, userIds);
    for (const feature of features) {
      feature.properties.tracked_now = feature.properties.user_id === null || !untracked.has(feature.properties.user_id);
    }
    return features;
  };

  const upload = defineRoute({
    method: 'POST',
    path: '/api/v1/realtime/positions',
    summary:
      'Upload positions (UploadPosesForm). 204 only once the whole batch is durably stored; an invalid pose rejects the batch (422, every bad item by index)',
    tags: ['positions'],
    auth: 'authenticated',
    action: 'positions:upload',
    allowPositioningKey: true,
    auditExempt: 'position uploads are data, not configuration: the positions themselves are the record (history, exports)',
    // The route checks the envelope; the pipeline checks each pose and reports every bad one by index. The
    // document shows the poses' full schema.
    body: uploadPosesSchema,
    bodyDoc: z.object({ poses: z.array(poseSchema).min(1).max(10_000) }),
    handler: async ({ principal, body }) => {
      await pipeline.process(principal, body.poses);
      return { status: 204 };
    },
  });

  const byBuilding = defineRoute({
    method: 'GET',
    path: '/api/v1/real_time/building/:building_id',
    summary: 'Live positions in a building: a GeoJSON FeatureCollection, one feature per device',
    tags: ['positions'],
    auth: 'authenticated',
    action: 'positions:read',
    params: z.object({ building_id: idParam }),
    response: featureCollectionSchema,
    handler: async ({ principal, params }) => {
      const em = storage.em();
      await services.cartography.building(em, principal, params.building_id);
      const features = await withTracking(
        principal.organizationId,
        await realtime.features({
          organizationId: principal.organizationId,
          buildingIds: [params.building_id],
          userIds: visibleUserIds(principal, undefined),
        }),
      );
      return { body: { type: 'FeatureCollection', features } };
    },
  });

  const search = defineRoute({
    method: 'GET',
    path: '/api/v1/realtime/positions',
    summary: 'Live positions with filters, plus devices_info (what the official client reads)',
    tags: ['positions'],
    auth: 'authenticated',
    action: 'positions:read',
    query: z.object({
      building_ids: listParam(z.coerce.number().int().positive()).optional(),
      user_ids: listParam(z.uuid()).optional(),
      device_ids: listParam(z.string()).optional(),
      indoor: booleanParam.optional(),
      max_sec_threshold: z.coerce.number().int().min(1).max(86_400).optional().describe('Only positions received within this many seconds'),
    }),
    response: featureCollectionSchema.extend({ devices_info: z.array(deviceInfoSchema) }),
    handler: async ({ principal, query }) => {
      const features = await withTracking(
        principal.organizationId,
        await realtime.features(
          {
            organizationId: principal.organizationId,
            buildingIds: query.building_ids,
            userIds: visibleUserIds(principal, query.user_ids),
            deviceIds: query.device_ids,
            indoor: query.indoor,
          },
          query.max_sec_threshold,
        ),
      );
      const em = storage.em();
      const identifiers = features.map((feature) => feature.id);
      const devices =
        identifiers.length === 0
          ? []
          : await em.find(DeviceSchema, { organization: principal.organizationId, identifier: { $in: identifiers } });
      const userIds = [...new Set(devices.map((device) => (device.user as { id: string } | null)?.id).filter((id): id is string => !!id))];
      const users = userIds.length === 0 ? [] : await em.find(UserSchema, { id: { $in: userIds } });
      const groupOf = new Map(users.map((user) => [user.id, (user.group as { id: string } | null)?.id]));
      const buildingOf = new Map(features.map((feature) => [feature.id, feature.properties.building_id]));
      const devicesInfo = devices.map((device) => {
        const userId = (device.user as { id: string } | null)?.id ?? null;
        const groupId = userId ? groupOf.get(userId) : undefined;
        const buildingId = buildingOf.get(device.identifier);
        return {
          id: device.identifier,
          uuid: device.id,
          code: device.identifier,
          name: device.name,
          organization_id: principal.organizationId,
          user_id: userId,
          group_ids: groupId ? [groupId] : [],
          building_ids: buildingId ? [buildingId] : [],
          created_at: device.createdAt.toISOString(),
          updated_at: device.updatedAt.toISOString(),
        };
      });
      return { body: { type: 'FeatureCollection', features, devices_info: devicesInfo } };
    },
  });

  return [upload, byBuilding, search];
}
