import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { ValidationError, fieldErrors, type FieldError } from '../../shared/errors.js';
import { OrganizationSchema, PoiCategorySchema, PoiSchema, type Poi } from '../../shared/storage/entities/index.js';
import type { Principal } from '../auth/principal.js';
import { customFieldsInput, latLngInput, place, positionInput } from '../cartography/placement.js';
import { indoorPoiSchema, outdoorPoiSchema, presentPoi } from '../cartography/presenters.js';
import { idParam } from '../http/query-schemas.js';
import { flushOrExplain, resourceRoutes, type ResourceContext } from '../http/resource.js';
import { defineRoute } from '../http/route.js';
import { listWholeOrPaged, pagesOnRequestQuery, wholeOrPaged } from '../http/whole-or-paged.js';
import type { GatewayServices } from '../services.js';

const POI_SORT = { id: 'id', name: 'name' };

const poiSchema = z.union([indoorPoiSchema, outdoorPoiSchema]);
const typeQuery = z.object({ type: z.enum(['indoor', 'outdoor']).optional() });

/** Indoor: `position` with a floor; outdoor: `location` (or a position without floor). */
const poiFields = {
  building_id: z.coerce.number().int().positive(),
  name: z.string().trim().min(1).max(300),
  info: z.string().max(100_000),
  category_id: z.coerce.number().int().positive().nullable(),
  position: positionInput.partial({ floor_id: true }),
  location: latLngInput,
  custom_fields: customFieldsInput,
};
const createPoiBody = z.object(poiFields).partial().required({ building_id: true, name: true });
const updatePoiBody = z.object(poiFields).partial();
type PoiBody = z.infer<typeof updatePoiBody>;

async function checkCategory(em: EntityManager, principal: Principal, categoryId: number | null | undefined, field: string): Promise<void> {
  if (categoryId === null || categoryId === undefined) return;
  const category = await em.findOne(PoiCategorySchema, {
    id: categoryId,
    $or: [{ organizationId: null }, { organizationId: principal.organizationId }],
  });
  if (!category) throw new ValidationError([{ field, message: `unknown category ${categoryId}` }]);
}

export function poiRoutes(services: GatewayServices) {
  const { cartography, storage } = services;

  /** Applies a body to a POI (new or existing), deriving both coordinate systems. */
  async function apply({ em, principal }: ResourceContext, poi: Partial<Poi>, body: PoiBody, prefix = ''): Promise<void> {
    const buildingId = body.building_id ?? poi.buildingId!;
    if (body.building_id !== undefined && poi.buildingId !== undefined && body.building_id !== poi.buildingId) {
      throw new ValidationError([{ field: `${prefix}building_id`, message: 'a POI cannot move to another building' }]);
    }
    const building = await cartography.building(em, principal, buildingId, `${prefix}building_id`);
    await checkCategory(em, principal, body.category_id, `${prefix}category_id`);
    const transform = cartography.transformOf(building);
    if (body.position?.floor_id !== undefined) {
      await cartography.floorOf(em, building, body.position.floor_id, `${prefix}position.floor_id`);
      const placed = place(transform, body.position, `${prefix}position`);
      Object.assign(poi, { indoor: true, floorId: body.position.floor_id, ...placed, radius: body.position.radius ?? poi.radius ?? 0 });
    } else if (body.location || body.position) {
      const geo =
        body.location ??
        body.position?.georeferences ??
        (body.position?.lat !== undefined ? { lat: body.position.lat, lng: body.position.lng! } : undefined);
      if (!geo || geo.lng === undefined)
        throw new ValidationError([{ field: `${prefix}location`, message: 'an outdoor POI needs location {lat, lng}' }]);
      Object.assign(poi, { indoor: false, floorId: null, x: null, y: null, lat: geo.lat, lng: geo.lng, radius: 0 });
    } else if (poi.id === undefined) {
      throw new ValidationError([
        { field: `${prefix}position`, message: 'give position {floor_id, cartesians|georeferences} or location {lat, lng}' },
      ]);
    }
    poi.buildingId = building.id;
    if (body.name !== undefined) poi.name = body.name;
    if (body.info !== undefined) poi.info = body.info;
    if (body.category_id !== undefined) poi.categoryId = body.category_id;
    if (body.custom_fields !== undefined) poi.customFields = body.custom_fields;
  }

  const newPoi = (context: ResourceContext): Partial<Poi> => ({
    organization: context.em.getReference(OrganizationSchema, context.principal.organizationId),
    info: '',
    customFields: [],
    categoryId: null,
    createdAt: new Date(),
    updatedAt: new Date(),
  });

  const resource = resourceRoutes(storage, {
    noun: 'POI',
    path: '/api/v1/pois',
    tag: 'cartography',
    entity: PoiSchema,
    idParam,
    actions: { read: 'cartography:read', write: 'cartography:write' },
    response: poiSchema,
    createBody: createPoiBody,
    updateBody: updatePoiBody,
    present: presentPoi,
    create: async (context, body) => {
      const poi = newPoi(context);
      await apply(context, poi, body);
      return context.em.create(PoiSchema, poi, { partial: true });
    },
    update: (context, poi, body) => apply(context, poi, body),
    onChange: ({ principal }, poi, change) =>
      cartography.announce({ organizationId: principal.organizationId, buildingId: poi.buildingId, kind: 'poi', id: poi.id, change }),
    list: {
      paginated: false,
      maxUnpaged: services.config.LIST_MAX_UNPAGED_ITEMS,
      sortFields: POI_SORT,
      query: typeQuery.extend({ building_id: idParam.optional() }),
      filter: (query) => ({
        ...(query.building_id ? { buildingId: query.building_id } : {}),
        ...(query.type ? { indoor: query.type === 'indoor' } : {}),
      }),
    },
  });

  const listOfBuilding = (path: string, fixedType: 'indoor' | 'outdoor' | undefined, hidden = false) =>
    defineRoute({
      method: 'GET',
      path,
      summary: fixedType === 'outdoor' ? 'Outdoor POIs of a building' : 'Indoor POIs of a building (type=outdoor for outdoor ones)',
      tags: ['cartography'],
      auth: 'authenticated',
      action: 'cartography:read',
      hidden,
      params: z.object({ building_id: idParam }),
      query: typeQuery.extend(pagesOnRequestQuery),
      response: wholeOrPaged(poiSchema),
      handler: async ({ principal, params, query }) => {
        const em = storage.em();
        const building = await cartography.building(em, principal, params.building_id);
        const type = fixedType ?? query.type ?? 'indoor';
        const where = { buildingId: building.id, indoor: type === 'indoor' };
        const list = { entity: PoiSchema, where, sortFields: POI_SORT, defaultSort: 'id', present: presentPoi };
        return { body: await listWholeOrPaged(em, { ...list, maxUnpaged: services.config.LIST_MAX_UNPAGED_ITEMS }, query) };
      },
    });

  const bulkMax = services.config.POIS_BULK_MAX;
  const bulkTooLong = `at most ${bulkMax} POIs per request (POIS_BULK_MAX)`;
  const bulk = defineRoute({
    method: 'POST',
    path: '/api/v1/pois_bulk',
    summary: 'Create many POIs at once: all are created, or none (422 lists each bad item by index)',
    tags: ['cartography'],
    auth: 'authenticated',
    action: 'cartography:write',
    // A building's worth at a time: one request creating 10,000 POIs holds a transaction and the building's
    // cartography announcement far longer than any editor needs (L3).
    body: z.array(z.unknown()).min(1).max(bulkMax, bulkTooLong),
    bodyDoc: z.array(createPoiBody).min(1).max(bulkMax, bulkTooLong),
    response: z.array(poiSchema),
    successStatus: 201,
    handler: async ({ principal, body, audit }) => {
      // All or none, with one audit entry per POI (so the log can be filtered by object), in one transaction.
      const created = await storage.em().transactional(async (em) => {
        const context = { em, principal };
        const errors: FieldError[] = [];
        const pois: Partial<Poi>[] = [];
        for (const [index, item] of body.entries()) {
          const parsed = createPoiBody.safeParse(item);
          if (!parsed.success) {
            errors.push(...fieldErrors(parsed.error, String(index)));
            continue;
          }
          const poi = newPoi(context);
          try {
            await apply(context, poi, parsed.data, `${index}.`);
            pois.push(poi);
          } catch (error) {
            if (error instanceof ValidationError) errors.push(...(error.errors ?? []));
            else throw error;
          }
        }
        if (errors.length > 0) throw new ValidationError(errors, 'Some POIs are invalid; none was created');
        const created = pois.map((poi) => em.create(PoiSchema, poi, { partial: true }));
        await flushOrExplain(em, 'POI');
        for (const poi of created) await audit.record(em, { objectType: 'pois', objectId: poi.id, before: null, after: presentPoi(poi) });
        return created;
      });
      for (const buildingId of new Set(created.map((poi) => poi.buildingId))) {
        await cartography.announce({ organizationId: principal.organizationId, buildingId, kind: 'poi', id: 0, change: 'created' });
      }
      return { status: 201, body: created.map(presentPoi) };
    },
  });

  return [
    ...resource,
    bulk,
    listOfBuilding('/api/v1/buildings/:building_id/pois', undefined),
    listOfBuilding('/api/v1/buildings/:building_id/exterior_pois', 'outdoor'),
    listOfBuilding('/api/v1/projects/:building_id/points_of_interest', 'indoor', true),
    listOfBuilding('/api/v1/projects/:building_id/exterior_pois', 'outdoor', true),
  ];
}
