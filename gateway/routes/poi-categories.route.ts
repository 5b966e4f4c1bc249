import { z } from 'zod';
import { ForbiddenError } from '../../shared/errors.js';
import { ImageSchema, PoiCategorySchema, type PoiCategory } from '../../shared/storage/entities/index.js';
import { poiCategorySchema, presentPoiCategory } from '../cartography/presenters.js';
import { idParam } from '../http/query-schemas.js';
import { referenced, resourceRoutes, type ResourceContext } from '../http/resource.js';
import type { Principal } from '../auth/principal.js';
import type { GatewayServices } from '../services.js';

const categoryFields = {
  name_en: z.string().trim().min(1).max(200),
  name_es: z.string().max(200),
  code: z.string().trim().min(1).max(100),
  icon: z.uuid().nullable().describe('Image id (POST /api/v1/images)'),
  selected_icon: z.uuid().nullable().describe('Image id'),
};

/** Platform defaults (no organization) are public and read-only; an organization edits only its own. */
function ownOnly(principal: Principal, category: PoiCategory): void {
  if (category.organizationId !== principal.organizationId) throw new ForbiddenError('Platform default categories are read-only');
}

/** Icons must be images of the caller's organization (L2): another tenant's image id gets 422. */
async function ownImages(context: ResourceContext, body: { icon?: string | null; selected_icon?: string | null }): Promise<void> {
  await referenced(context, ImageSchema, body.icon, 'icon', 'image');
  await referenced(context, ImageSchema, body.selected_icon, 'selected_icon', 'image');
}

export function poiCategoryRoutes(services: GatewayServices) {
  return resourceRoutes(services.storage, {
    noun: 'POI category',
    path: '/api/v1/poi_categories',
    tag: 'cartography',
    entity: PoiCategorySchema,
    idParam,
    actions: { read: 'cartography:read', write: 'cartography:write' },
    response: poiCategorySchema,
    createBody: z.object({ ...categoryFields, name_es: categoryFields.name_es.default('') }).partial({ icon: true, selected_icon: true }),
    updateBody: z.object(categoryFields).partial(),
    scope: (principal) => ({ $or: [{ organizationId: null }, { organizationId: principal.organizationId }] }),
    present: presentPoiCategory,
    create: async (context, body) => {
      const { em, principal } = context;
      await ownImages(context, body);
      return em.create(PoiCategorySchema, {
        organizationId: principal.organizationId,
        nameEn: body.name_en,
        nameEs: body.name_es,
        code: body.code,
        iconId: body.icon ?? null,
        selectedIconId: body.selected_icon ?? null,
        public: false,
        createdAt: new Date(),
        updatedAt: new Date(),
      });
    },
    update: async (context, category, body) => {
      ownOnly(context.principal, category);
      await ownImages(context, body);
      if (body.name_en !== undefined) category.nameEn = body.name_en;
      if (body.name_es !== undefined) category.nameEs = body.name_es;
      if (body.code !== undefined) category.code = body.code;
      if (body.icon !== undefined) category.iconId = body.icon;
      if (body.selected_icon !== undefined) category.selectedIconId = body.selected_icon;
    },
    beforeDelete: ({ principal }, category) => ownOnly(principal, category),
    list: {
      paginated: false,
      maxUnpaged: services.config.LIST_MAX_UNPAGED_ITEMS,
      sortFields: { id: 'id', code: 'code' },
      query: z.object({}),
      filter: () => ({}),
    },
  });
}
