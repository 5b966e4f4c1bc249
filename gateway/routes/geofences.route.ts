import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ValidationError } from '../../shared/errors.js';
import { cartesianToGeometric, geometricToCartesian, validateRing, type Point } from '../../shared/geo/geometry.js';
import { GEOFENCE_TYPES, GeofenceSchema, OrganizationSchema, type Geofence } from '../../shared/storage/entities/index.js';
import { checkGeofenceBudget } from '../cartography/geofence-budget.js';
import { customFieldsInput, latitude, longitude } from '../cartography/placement.js';
import { geofenceSchema, presentGeofence } from '../cartography/presenters.js';
import { booleanParam, listParam, pageMetadata, paginated, paginationQuery, uuidParam } from '../http/query-schemas.js';
import { findPage } from '../http/whole-or-paged.js';
import { resourceRoutes, type ResourceContext } from '../http/resource.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';

const latLngPair = z.tuple([latitude, longitude]);
const xyPair = z.tuple([z.number().finite(), z.number().finite()]);

const geofenceFields = {
  name: z.string().trim().min(1).max(300),
  building_id: z.coerce.number().int().positive().describe('A number or a numeric string'),
  floor_id: z.coerce.number().int().positive(),
  level_id: z.coerce.number().int().positive().describe('Same as floor_id'),
  type: z.enum(GEOFENCE_TYPES),
  geometric: z.array(latLngPair).min(1).max(10_000).describe('[lat, lng] pairs'),
  cartesians: z.array(xyPair).min(1).max(10_000).describe('[x, y] pairs in metres, instead of geometric'),
  radius: z.number().positive().nullable(),
  code: z.string().max(200),
  description: z.string().max(10_000).nullable(),
  info: z.string().max(100_000).nullable(),
  max_stay_time: z.number().int().positive().nullable(),
  min_dwell_s: z.number().int().min(0).max(86_400),
  exit_grace_s: z.number().int().min(0).max(86_400),
  muster_point: z
    .boolean()
    .describe('An assembly point of evacuations; only a closed shape (POLYGON or CIRCLE), which may lie outside the footprint'),
  custom_fields: customFieldsInput,
  organization_id: z.string().optional().describe('Ignored unless it names another organization (then 422)'),
};
const MUSTER_SHAPES: ReadonlySet<Geofence['type']> = new Set(['POLYGON', 'CIRCLE']);
const createBody = z.object(geofenceFields).partial().required({ name: true, building_id: true, type: true });
const updateBody = z.object(geofenceFields).partial();
type GeofenceBody = z.infer<typeof updateBody>;

/** Shape rules per type; a polygon ring is closed, non-degenerate and does not cross itself. */
function checkShape(type: Geofence['type'], points: Point[], radius: number | null | undefined, field: string): void {
  const fail = (message: string) => {
    throw new ValidationError([{ field, message }]);
  };
  if (type === 'POLYGON') {
    const problems = validateRing(points);
    if (problems.length > 0) throw new ValidationError(problems.map((problem) => ({ field, message: problem.message })));
  } else if (type === 'CIRCLE') {
    if (points.length !== 1) fail('a CIRCLE is one centre point');
    if (!radius) throw new ValidationError([{ field: 'radius', message: 'a CIRCLE needs a radius > 0' }]);
  } else if (type === 'POINT') {
    if (points.length !== 1) fail('a POINT is one point');
  } else if (points.length < 2) {
    fail('a LINE needs at least two points');
  }
}

export function geofenceRoutes(services: GatewayServices) {
  const { cartography, storage, config } = services;
  const budget = {
    maxPerBuilding: config.GEOFENCES_MAX_PER_BUILDING,
    maxVerticesPerOrganization: config.GEOFENCE_VERTICES_MAX_PER_ORGANIZATION,
  };

  async function apply({ em, principal }: ResourceContext, geofence: Partial<Geofence>, body: GeofenceBody): Promise<void> {
    if (body.organization_id !== undefined && body.organization_id !== principal.organizationId) {
      throw new ValidationError([{ field: 'organization_id', message: 'not your organization' }]);
    }
    if (body.building_id !== undefined && geofence.buildingId !== undefined && body.building_id !== geofence.buildingId) {
      throw new ValidationError([{ field: 'building_id', message: 'a geofence cannot move to another building' }]);
    }
    const building = await cartography.building(em, principal, body.building_id ?? geofence.buildingId!, 'building_id');
    const floorId = body.floor_id ?? body.level_id ?? geofence.floorId;
    if (floorId === undefined) throw new ValidationError([{ field: 'floor_id', message: 'required' }]);
    await cartography.floorOf(em, building, floorId, body.floor_id !== undefined ? 'floor_id' : 'level_id');
    const type = body.type ?? geofence.type!;
    const radius = body.radius !== undefined ? body.radius : geofence.radius;
    const transform = cartography.transformOf(building);
    let cartesians = geofence.cartesians as Point[] | undefined;
    let geometric = geofence.geometric;
    let field = 'geometric';
    if (body.cartesians) {
      cartesians = body.cartesians;
      geometric = cartesianToGeometric(cartesians, transform) as [number, number][];
      field = 'cartesians';
    } else if (body.geometric) {
      geometric = body.geometric;
      cartesians = geometricToCartesian(geometric, transform);
    }
    if (!cartesians || !geometric) throw new ValidationError([{ field: 'geometric', message: 'required' }]);
    checkShape(type, cartesians, radius, field);
    await checkGeofenceBudget(em, budget, {
      id: geofence.id!,
      organizationId: principal.organizationId,
      buildingId: building.id,
      vertices: cartesians.length,
    });
    const geometry = (fence: Partial<Geofence>) => JSON.stringify([fence.floorId, fence.type, fence.radius ?? null, fence.cartesians]);
    const before = geometry(geofence);
    Object.assign(geofence, {
      buildingId: building.id,
      floorId,
      type,
      radius: radius ?? null,
      geometric,
      cartesians: cartesians.map(([x, y]) => [x, y]),
    });
    // A new geometry is a new version from now on: reports read stays computed against the old one only before.
    if (geofence.geometryVersion === undefined) Object.assign(geofence, { geometryVersion: 1, geometrySince: new Date() });
    else if (geometry(geofence) !== before)
      Object.assign(geofence, { geometryVersion: geofence.geometryVersion + 1, geometrySince: new Date() });
    if (body.name !== undefined) geofence.name = body.name;
    if (body.code !== undefined) geofence.code = body.code;
    if (body.description !== undefined) geofence.description = body.description;
    if (body.info !== undefined) geofence.info = body.info;
    if (body.max_stay_time !== undefined) geofence.maxStayTime = body.max_stay_time;
    if (body.min_dwell_s !== undefined) geofence.minDwellS = body.min_dwell_s;
    if (body.exit_grace_s !== undefined) geofence.exitGraceS = body.exit_grace_s;
    if (body.custom_fields !== undefined) geofence.customFields = body.custom_fields;
    if (body.muster_point !== undefined) geofence.musterPoint = body.muster_point;
    // People are counted in an assembly point by standing inside it: a point or a line has no inside.
    if (geofence.musterPoint && !MUSTER_SHAPES.has(type)) {
      throw new ValidationError([
        { field: 'muster_point', message: `an assembly point is a closed shape (POLYGON or CIRCLE), not a ${type}` },
      ]);
    }
  }

  const resourceFor = (path: string) =>
    resourceRoutes(storage, {
      noun: 'geofence',
      path,
      tag: 'cartography',
      entity: GeofenceSchema,
      idParam: uuidParam,
      actions: { read: 'cartography:read', write: 'cartography:write' },
      response: geofenceSchema,
      createBody,
      updateBody,
      present: presentGeofence,
      create: async (context, body) => {
        const geofence: Partial<Geofence> = {
          id: randomUUID(),
          organization: context.em.getReference(OrganizationSchema, context.principal.organizationId),
          code: '',
          customFields: [],
          minDwellS: 0,
          exitGraceS: 0,
          musterPoint: false,
          deleted: false,
          createdAt: new Date(),
          updatedAt: new Date(),
        };
        await apply(context, geofence, body);
        return context.em.create(GeofenceSchema, geofence, { partial: true });
      },
      update: (context, geofence, body) => apply(context, geofence, body),
      // Soft delete: reports over past periods still need the geometry; found again with `deleted=true`.
      remove: (_context, geofence) => {
        geofence.deleted = true;
      },
      onChange: ({ principal }, geofence, change) =>
        cartography.announce({
          organizationId: principal.organizationId,
          buildingId: geofence.buildingId,
          kind: 'geofence',
          id: geofence.id,
          change,
        }),
    });

  /** Areas search (spec) and geofences search (official client): one handler, both filter spellings. */
  const search = (path: string) =>
    defineRoute({
      method: 'GET',
      path,
      summary: 'Search areas/geofences; at least one of organization_id, building_id(s), deleted',
      tags: ['cartography'],
      auth: 'authenticated',
      action: 'cartography:read',
      query: z.object({
        organization_id: z.string().optional(),
        building_id: listParam(z.coerce.number().int().positive()).optional(),
        building_ids: listParam(z.coerce.number().int().positive()).optional(),
        name: z.string().max(300).optional(),
        deleted: booleanParam.optional(),
        ...paginationQuery,
      }),
      response: paginated(geofenceSchema),
      handler: async ({ principal, query }) => {
        if (query.organization_id === undefined && !query.building_id && !query.building_ids && query.deleted === undefined) {
          throw new ValidationError([{ field: 'query', message: 'give at least one of organization_id, building_id, deleted' }]);
        }
        const metadataOf = (total: number, returned: number) => pageMetadata(query, total, returned);
        // Another organization's id finds nothing, exactly as an unknown one.
        if (query.organization_id !== undefined && query.organization_id !== principal.organizationId) {
          return { body: { data: [], metadata: metadataOf(0, 0) } };
        }
        const buildings = [...(query.building_id ?? []), ...(query.building_ids ?? [])];
        const where = {
          organization: principal.organizationId,
          deleted: query.deleted ?? false,
          ...(buildings.length > 0 ? { buildingId: { $in: buildings } } : {}),
          ...(query.name ? { name: { $ilike: `%${query.name.replace(/[\\%_]/g, (c) => `\\${c}`)}%` } } : {}),
        };
        const sorting = {
          sortFields: { name: 'name', code: 'code', created_at: 'createdAt', updated_at: 'updatedAt', id: 'id' },
          defaultSort: 'created_at',
        };
        const { rows, metadata } = await findPage(storage.em(), GeofenceSchema, where, query, sorting);
        return { body: { data: rows.map(presentGeofence), metadata } };
      },
    });

  return [
    search('/api/v1/geofences/search'),
    search('/api/v1/areas/search'),
    ...resourceFor('/api/v1/geofences'),
    ...resourceFor('/api/v1/areas'),
  ];
}
