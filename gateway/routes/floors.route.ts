import { z } from 'zod';
import { ValidationError } from '../../shared/errors.js';
import { FloorSchema, OrganizationSchema, type Floor } from '../../shared/storage/entities/index.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { imageWidth } from '../cartography/cartography-store.js';
import { customFieldsInput } from '../cartography/placement.js';
import { floorSchema, presentFloor } from '../cartography/presenters.js';
import { idParam } from '../http/query-schemas.js';
import { resourceRoutes } from '../http/resource.js';
import { listWholeOrPaged, pagesOnRequestQuery, wholeOrPaged } from '../http/whole-or-paged.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';

const floorFields = {
  building_id: z.coerce.number().int().positive(),
  level: z.number().int().min(-200).max(500),
  level_height: z.number().finite(),
  name: z.string().max(200),
  map_id: z.uuid().nullable().describe('Floorplan: the id returned by POST /api/v1/images'),
  scale: z.number().positive().nullable().describe('Pixels per metre; derived from the image width and the building width when omitted'),
  custom_fields: customFieldsInput,
};

/** The floorplan must be an image of the caller's organization; its pixel width gives a default scale. */
async function floorplanWidth(em: EntityManager, organizationId: string, mapId: string): Promise<number | null> {
  const width = await imageWidth(em, organizationId, mapId);
  if (width === undefined) throw new ValidationError([{ field: 'map_id', message: 'no such image in your organization' }]);
  return width;
}

const FLOOR_SORT = { id: 'id', level: 'level', name: 'name' };

export function floorRoutes(services: GatewayServices) {
  const { cartography, storage } = services;
  const announce = (organizationId: string, floor: Floor, change: 'created' | 'updated' | 'deleted') =>
    cartography.announce({ organizationId, buildingId: floor.buildingId, kind: 'floor', id: floor.id, change });

  const byBuilding = defineRoute({
    method: 'GET',
    path: '/api/v1/buildings/:building_id/floors',
    summary: 'Floors of a building',
    tags: ['cartography'],
    auth: 'authenticated',
    action: 'cartography:read',
    params: z.object({ building_id: idParam }),
    query: z.object(pagesOnRequestQuery),
    response: wholeOrPaged(floorSchema),
    handler: async ({ principal, params, query }) => {
      const em = storage.em();
      const building = await cartography.building(em, principal, params.building_id);
      const list = {
        entity: FloorSchema,
        where: { buildingId: building.id },
        sortFields: FLOOR_SORT,
        defaultSort: 'level',
        present: presentFloor,
      };
      return { body: await listWholeOrPaged(em, { ...list, maxUnpaged: services.config.LIST_MAX_UNPAGED_ITEMS }, query) };
    },
  });

  const resource = resourceRoutes(storage, {
    noun: 'floor',
    path: '/api/v1/floors',
    tag: 'cartography',
    entity: FloorSchema,
    idParam,
    actions: { read: 'cartography:read', write: 'cartography:write' },
    response: floorSchema,
    createBody: z
      .object({
        ...floorFields,
        level_height: floorFields.level_height.default(0),
        name: floorFields.name.default(''),
      })
      .partial({ map_id: true, scale: true, custom_fields: true }),
    updateBody: z.object(floorFields).partial(),
    present: (floor) => presentFloor(floor),
    create: async ({ em, principal }, body) => {
      const building = await cartography.building(em, principal, body.building_id, 'building_id');
      let scale = body.scale ?? null;
      if (body.map_id) {
        const width = await floorplanWidth(em, principal.organizationId, body.map_id);
        if (scale === null && width) scale = width / building.width;
      }
      return em.create(FloorSchema, {
        organization: em.getReference(OrganizationSchema, principal.organizationId),
        buildingId: building.id,
        name: body.name,
        level: body.level,
        levelHeight: body.level_height,
        scale,
        mapId: body.map_id ?? null,
        customFields: body.custom_fields ?? [],
        createdAt: new Date(),
        updatedAt: new Date(),
      });
    },
    update: async ({ em, principal }, floor, body) => {
      if (body.building_id !== undefined && body.building_id !== floor.buildingId) {
        throw new ValidationError([{ field: 'building_id', message: 'a floor cannot move to another building' }]);
      }
      if (body.map_id) {
        const width = await floorplanWidth(em, principal.organizationId, body.map_id);
        if (body.scale === undefined && width) floor.scale = width / (await cartography.building(em, principal, floor.buildingId)).width;
      }
      if (body.map_id !== undefined) floor.mapId = body.map_id;
      if (body.scale !== undefined) floor.scale = body.scale;
      if (body.level !== undefined) floor.level = body.level;
      if (body.level_height !== undefined) floor.levelHeight = body.level_height;
      if (body.name !== undefined) floor.name = body.name;
      if (body.custom_fields !== undefined) floor.customFields = body.custom_fields;
    },
    onChange: ({ principal }, floor, change) => announce(principal.organizationId, floor, change),
    list: {
      paginated: false,
      maxUnpaged: services.config.LIST_MAX_UNPAGED_ITEMS,
      sortFields: FLOOR_SORT,
      query: z.object({ building_id: idParam.optional() }),
      filter: (query) => (query.building_id ? { buildingId: query.building_id } : {}),
    },
  });
  return [byBuilding, ...resource];
}
