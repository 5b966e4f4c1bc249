import { z } from 'zod';
import { ValidationError, type FieldError } from '../../shared/errors.js';
import { BuildingPathsSchema, FloorSchema } from '../../shared/storage/entities/index.js';
import { upsertPaths } from '../cartography/cartography-store.js';
import { pathsSchema, presentPaths } from '../cartography/presenters.js';
import { idParam } from '../http/query-schemas.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';

const pathsBody = z.object({
  nodes: z
    .array(z.object({ id: z.number().int(), floor_id: z.coerce.number().int().positive(), x: z.number().finite(), y: z.number().finite() }))
    .max(100_000),
  links: z
    .array(
      z.object({
        source: z.number().int(),
        target: z.number().int(),
        origin: z.enum(['source', 'target', 'both']).default('both'),
        // The spec's field list spells it `accesible`; samples and clients use `accessible`. Both are read.
        accessible: z.boolean().optional(),
        accesible: z.boolean().optional(),
        tags: z.array(z.string().max(100)).max(50).default([]),
      }),
    )
    .max(200_000),
});

/** The navigation graph, replaced as a whole: node ids unique, floors of this building, links between existing nodes. */
export function pathRoutes(services: GatewayServices) {
  const { cartography, storage } = services;

  const read = (path: string, hidden = false) =>
    defineRoute({
      method: 'GET',
      path,
      summary: 'Navigation graph of a building',
      tags: ['cartography'],
      auth: 'authenticated',
      action: 'cartography:read',
      hidden,
      params: z.object({ building_id: idParam }),
      response: pathsSchema,
      handler: async ({ principal, params }) => {
        const em = storage.em();
        const building = await cartography.building(em, principal, params.building_id);
        return { body: presentPaths(await em.findOne(BuildingPathsSchema, { buildingId: building.id })) };
      },
    });

  return [
    read('/api/v1/buildings/:building_id/paths'),
    read('/api/v1/projects/:building_id/paths', true),
    defineRoute({
      method: 'GET',
      path: '/api/v1/paths',
      summary: 'Navigation graphs of every building of the organization, merged (node ids are per building)',
      tags: ['cartography'],
      auth: 'authenticated',
      action: 'cartography:read',
      response: pathsSchema,
      handler: async ({ principal }) => {
        const all = await storage
          .em()
          .find(BuildingPathsSchema, { organization: principal.organizationId }, { orderBy: { buildingId: 'asc' } });
        return { body: { nodes: all.flatMap((paths) => paths.nodes), links: all.flatMap((paths) => paths.links) } };
      },
    }),
    defineRoute({
      method: 'PUT',
      path: '/api/v1/buildings/:building_id/paths',
      summary: 'Replace the navigation graph of a building',
      tags: ['cartography'],
      auth: 'authenticated',
      action: 'cartography:write',
      params: z.object({ building_id: idParam }),
      body: pathsBody,
      response: pathsSchema,
      handler: async ({ principal, params, body, audit }) => {
        const em = storage.em();
        const building = await cartography.building(em, principal, params.building_id);
        const floors = new Set((await em.find(FloorSchema, { buildingId: building.id })).map((floor) => floor.id));
        const errors: FieldError[] = [];
        const nodeIds = new Set<number>();
        body.nodes.forEach((node, index) => {
          if (nodeIds.has(node.id)) errors.push({ field: `nodes.${index}.id`, message: `duplicate node id ${node.id}` });
          nodeIds.add(node.id);
          if (!floors.has(node.floor_id))
            errors.push({ field: `nodes.${index}.floor_id`, message: `no floor ${node.floor_id} in building ${building.id}` });
        });
        body.links.forEach((link, index) => {
          if (!nodeIds.has(link.source)) errors.push({ field: `links.${index}.source`, message: `no node ${link.source}` });
          if (!nodeIds.has(link.target)) errors.push({ field: `links.${index}.target`, message: `no node ${link.target}` });
        });
        if (errors.length > 0) throw new ValidationError(errors.slice(0, 100));
        const links = body.links.map((link) => ({
          source: link.source,
          target: link.target,
          origin: link.origin,
          accessible: link.accessible ?? link.accesible ?? true,
          tags: link.tags,
        }));
        // One upsert (two PUTs at once both succeed, the last wins whole), in one transaction with the audit entry,
        // which records the graph's size before and after rather than copying a graph of up to 100,000 nodes into the log.
        await storage.em().transactional(async (tx) => {
          const previous = await tx.findOne(BuildingPathsSchema, { buildingId: building.id });
          await upsertPaths(tx, { buildingId: building.id, organizationId: principal.organizationId, nodes: body.nodes, links });
          const size = (nodes: unknown[], links: unknown[]) => ({ building_id: building.id, nodes: nodes.length, links: links.length });
          await audit.record(tx, {
            objectType: 'paths',
            objectId: building.id,
            before: previous ? size(previous.nodes, previous.links) : null,
            after: size(body.nodes, links),
          });
        });
        await cartography.announce({
          organizationId: principal.organizationId,
          buildingId: building.id,
          kind: 'paths',
          id: building.id,
          change: 'updated',
        });
        return { body: { nodes: body.nodes, links } };
      },
    }),
  ];
}
