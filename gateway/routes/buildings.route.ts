import { z } from 'zod';
import { MAX_ABS_LAT, createBuildingTransform, deriveGeometryFromCorners } from '../../shared/geo/building-transform.js';
import { ValidationError } from '../../shared/errors.js';
import {
  BuildingPathsSchema,
  BuildingSchema,
  EventSchema,
  FloorSchema,
  GeofenceSchema,
  ImageSchema,
  OrganizationSchema,
  PoiSchema,
  type Building,
} from '../../shared/storage/entities/index.js';
import { customFieldsInput, latLngInput } from '../cartography/placement.js';
import {
  buildingSchema,
  eventSchema,
  floorSchema,
  geofenceSchema,
  indoorPoiSchema,
  outdoorPoiSchema,
  pathsSchema,
  presentBuilding,
  presentCompactBuilding,
  presentEvent,
  presentFloor,
  presentGeofence,
  presentPaths,
  presentPoi,
} from '../cartography/presenters.js';
import { idParam } from '../http/query-schemas.js';
import { referenced, resourceRoutes } from '../http/resource.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';

/** What `view=compact` answers instead of the full building (see presentCompactBuilding). */
const compactBuildingSchema = buildingSchema.pick({
  id: true,
  name: true,
  location: true,
  corners: true,
  dimensions: true,
  rotation: true,
  created_at: true,
  updated_at: true,
});

const viewQuery = z.object({ view: z.enum(['compact', 'full']).optional().describe('compact: fewer fields, no nested lists') });

/** The longest side a building may have, in metres (the database refuses anything not in (0, this]). */
const MAX_SIDE_M = 10_000;
/**
 * The shortest: 1 cm. Positive is not enough: a floorplan's scale is its pixel width over the building's, and a
 * side of 5e-324 m makes it infinite, which no floor write can store.
 */
const MIN_SIDE_M = 0.01;

const buildingFields = {
  name: z.string().trim().min(1).max(200),
  description: z.string().max(10_000).nullable(),
  info: z.string().max(100_000).nullable(),
  /** Not at the poles: no plane is georeferenced there, and the transform refuses it (see building-transform.ts). */
  location: latLngInput.extend({
    lat: z
      .number()
      .min(-MAX_ABS_LAT, `a building's latitude must be within ±${MAX_ABS_LAT}`)
      .max(MAX_ABS_LAT, `a building's latitude must be within ±${MAX_ABS_LAT}`),
  }),
  dimensions: z.object({ width: z.number().min(MIN_SIDE_M).max(MAX_SIDE_M), length: z.number().min(MIN_SIDE_M).max(MAX_SIDE_M) }),
  rotation: z.number().finite(),
  corners: z.array(latLngInput).length(4, 'four corners: topleft, topright, bottomright, bottomleft'),
  custom_fields: customFieldsInput,
  picture_id: z.uuid().nullable(),
};

/**
 * A building is placed by location + dimensions + rotation; when only `corners` are sent, those three are
 * derived from them (and corners are always derived back, so they stay consistent).
 */
const createBuildingBody = z
  .object(buildingFields)
  .partial()
  .required({ name: true })
  .superRefine((body, context) => {
    if (!body.corners && (!body.location || !body.dimensions)) {
      context.addIssue({ code: 'custom', path: ['location'], message: 'give location and dimensions (and rotation), or corners' });
    }
  });
const updateBuildingBody = z.object(buildingFields).partial();

function placement(body: z.infer<typeof updateBuildingBody>, current?: Building) {
  const placed = place(body, current);
  // Stored geometry must make a transform, or every later read of the building (and of what it holds) fails.
  try {
    createBuildingTransform(placed);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw new ValidationError([{ field: body.corners && !body.location ? 'corners' : 'location', message: error.message }]);
  }
  return placed;
}

function place(body: z.infer<typeof updateBuildingBody>, current?: Building) {
  if (body.corners && !body.location && !body.dimensions && body.rotation === undefined) {
    const derived = deriveGeometryFromCorners(body.corners);
    // Corners are free input: four equal points, or points a continent apart, derive no building the database keeps.
    const { width, length } = derived.dimensions;
    if (!(width >= MIN_SIDE_M && width <= MAX_SIDE_M && length >= MIN_SIDE_M && length <= MAX_SIDE_M)) {
      throw new ValidationError([
        { field: 'corners', message: `the corners must make a rectangle with sides of ${MIN_SIDE_M} to ${MAX_SIDE_M} m` },
      ]);
    }
    return { location: derived.location, dimensions: derived.dimensions, rotation: derived.rotation };
  }
  const location = body.location ?? (current ? { lat: current.locationLat, lng: current.locationLng } : undefined);
  const dimensions = body.dimensions ?? (current ? { width: current.width, length: current.length } : undefined);
  // Corners with a rotation, or a location without dimensions, place nothing on their own.
  if (!location || !dimensions)
    throw new ValidationError([
      { field: location ? 'dimensions' : 'location', message: 'give location and dimensions (and rotation), or corners alone' },
    ]);
  return { location, dimensions, rotation: body.rotation ?? current?.rotation ?? 0 };
}

/** Buildings: list, detail (with floors, POIs, events, paths and geofences), writes. */
export function buildingRoutes(services: GatewayServices) {
  const { cartography } = services;
  const present = (building: Building) => presentBuilding(building, cartography.transformOf(building));
  const announce = (organizationId: string, building: Building, change: 'created' | 'updated' | 'deleted') =>
    cartography.announce({ organizationId, buildingId: building.id, kind: 'building', id: building.id, change });

  const list = defineRoute({
    method: 'GET',
    path: '/api/v1/buildings',
    summary: "Buildings of the caller's organization",
    tags: ['cartography'],
    auth: 'authenticated',
    action: 'cartography:read',
    query: viewQuery,
    response: z.array(z.xor([buildingSchema, compactBuildingSchema.describe('view=compact')])),
    handler: async ({ principal, query }) => {
      const buildings = await services.storage
        .em()
        .find(BuildingSchema, { organization: principal.organizationId }, { orderBy: { id: 'asc' } });
      return {
        body: buildings.map((b) => (query.view === 'compact' ? presentCompactBuilding(b, cartography.transformOf(b)) : present(b))),
      };
    },
  });

  const resource = resourceRoutes(services.storage, {
    noun: 'building',
    path: '/api/v1/buildings',
    tag: 'cartography',
    entity: BuildingSchema,
    idParam,
    actions: { read: 'cartography:read', write: 'cartography:write' },
    response: buildingSchema,
    createBody: createBuildingBody,
    updateBody: updateBuildingBody,
    present,
    detail: {
      query: viewQuery,
      response: z.xor([
        buildingSchema.extend({
          floors: z.array(floorSchema),
          indoor_pois: z.array(indoorPoiSchema),
          outdoor_pois: z.array(outdoorPoiSchema),
          events: z.array(eventSchema),
          paths: pathsSchema,
          geofences: z.array(geofenceSchema),
        }),
        compactBuildingSchema.describe('view=compact'),
      ]),
      build: async ({ em }, building, query) => {
        const transform = cartography.transformOf(building);
        if (query.view === 'compact') return presentCompactBuilding(building, transform);
        const where = { buildingId: building.id };
        // One query per list, all started together: the detail of a large venue is a handful of round trips.
        const [floors, pois, events, paths, geofences] = await Promise.all([
          em.fork().find(FloorSchema, where, { orderBy: { level: 'asc' } }),
          em.fork().find(PoiSchema, where, { orderBy: { id: 'asc' } }),
          em.fork().find(EventSchema, where, { orderBy: { id: 'asc' } }),
          em.fork().findOne(BuildingPathsSchema, { buildingId: building.id }),
          em.fork().find(GeofenceSchema, { ...where, deleted: false }, { orderBy: { createdAt: 'asc' } }),
        ]);
        return {
          ...presentBuilding(building, transform),
          floors: floors.map((floor) => presentFloor(floor, true)),
          indoor_pois: pois.filter((poi) => poi.indoor).map(presentPoi),
          outdoor_pois: pois.filter((poi) => !poi.indoor).map(presentPoi),
          events: events.map(presentEvent),
          paths: presentPaths(paths),
          geofences: geofences.map(presentGeofence),
        };
      },
    },
    create: async (context, body) => {
      const { em, principal } = context;
      // An image of another organization is no picture of this one (L2).
      await referenced(context, ImageSchema, body.picture_id, 'picture_id', 'image');
      const { location, dimensions, rotation } = placement(body);
      return em.create(BuildingSchema, {
        organization: em.getReference(OrganizationSchema, principal.organizationId),
        userId: principal.userId,
        name: body.name,
        description: body.description ?? null,
        info: body.info ?? null,
        locationLat: location.lat,
        locationLng: location.lng,
        width: dimensions.width,
        length: dimensions.length,
        rotation,
        customFields: body.custom_fields ?? [],
        pictureId: body.picture_id ?? null,
        createdAt: new Date(),
        updatedAt: new Date(),
      });
    },
    update: async (context, building, body) => {
      await referenced(context, ImageSchema, body.picture_id, 'picture_id', 'image');
      const moved =
        body.location !== undefined || body.dimensions !== undefined || body.rotation !== undefined || body.corners !== undefined;
      if (moved) {
        const { location, dimensions, rotation } = placement(body, building);
        Object.assign(building, {
          locationLat: location.lat,
          locationLng: location.lng,
          width: dimensions.width,
          length: dimensions.length,
          rotation,
        });
      }
      if (body.name !== undefined) building.name = body.name;
      if (body.description !== undefined) building.description = body.description;
      if (body.info !== undefined) building.info = body.info;
      if (body.custom_fields !== undefined) building.customFields = body.custom_fields;
      if (body.picture_id !== undefined) building.pictureId = body.picture_id;
    },
    onChange: ({ principal }, building, change) => announce(principal.organizationId, building, change),
  });
  return [list, ...resource];
}
