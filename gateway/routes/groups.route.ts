import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { GroupSchema, OrganizationSchema, type Group } from '../../shared/storage/entities/index.js';
import { listParam, uuidParam } from '../http/query-schemas.js';
import { resourceRoutes } from '../http/resource.js';
import type { GatewayServices } from '../services.js';

const groupFields = { name: z.string().trim().min(1).max(200), description: z.string().max(2000) };

const groupResponse = z.object({
  id: z.uuid(),
  organization_id: z.uuid(),
  name: z.string(),
  description: z.string(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});

const presentGroup = (group: Group): z.infer<typeof groupResponse> => ({
  id: group.id,
  organization_id: (group.organization as { id: string }).id,
  name: group.name,
  description: group.description,
  created_at: group.createdAt.toISOString(),
  updated_at: group.updatedAt.toISOString(),
});

/** Groups associate users under a name (a user is put in a group through the user's `groups` field). */
export function groupRoutes(services: GatewayServices) {
  return resourceRoutes(services.storage, {
    noun: 'group',
    path: '/api/v1/groups',
    tag: 'groups',
    entity: GroupSchema,
    idParam: uuidParam,
    actions: { read: 'groups:read', write: 'groups:write' },
    response: groupResponse,
    createBody: z.object({ name: groupFields.name, description: groupFields.description.default('') }),
    updateBody: z.object(groupFields).partial(),
    present: presentGroup,
    create: (context, body) =>
      context.em.create(GroupSchema, {
        id: randomUUID(),
        organization: context.em.getReference(OrganizationSchema, context.principal.organizationId),
        name: body.name,
        description: body.description,
        createdAt: new Date(),
        updatedAt: new Date(),
      }),
    update: (_context, group, body) => {
      if (body.name !== undefined) group.name = body.name;
      if (body.description !== undefined) group.description = body.description;
    },
    list: {
      paginated: false,
      maxUnpaged: services.config.LIST_MAX_UNPAGED_ITEMS,
      sortFields: { id: 'id', name: 'name' },
      query: z.object({ ids: listParam(z.uuid()).optional(), name: z.string().optional() }),
      filter: (query) => ({ ...(query.ids ? { id: { $in: query.ids } } : {}), ...(query.name ? { name: query.name } : {}) }),
    },
  });
}
