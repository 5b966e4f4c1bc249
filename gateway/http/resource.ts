import {
  UniqueConstraintViolationException,
  ForeignKeyConstraintViolationException,
  type EntitySchema,
  type FilterQuery,
} from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../../shared/errors.js';
import type { Storage } from '../../shared/storage/index.js';
import { can, type Action } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import { paginated, paginationQuery, type PageRequest } from './query-schemas.js';
import { defineRoute, type RouteDefinition } from './route.js';
import { findPage, listWholeOrPaged, pagesOnRequestQuery, wholeOrPaged } from './whole-or-paged.js';

export interface ResourceContext {
  em: EntityManager;
  principal: Principal;
}

/**
 * One REST resource as a short declaration. The helper does the rest the same way for every resource:
 * organization scope (another organization's object is a 404, exactly like a missing one), the role check,
 * validation, PUT and PATCH (both partial: the official client sends partial PUTs), constraint violations as
 * 409/422, the audit entry (in the write's transaction), and an optional change hook (index invalidation on the
 * bus, after the commit).
 */
export interface ResourceSpec<E extends object, Create, Update, _ListQuery> {
  /** Singular noun for messages: "Group not found". */
  noun: string;
  /** Collection path, e.g. `/api/v1/groups`. */
  path: string;
  tag: string;
  entity: EntitySchema<E>;
  idParam: z.ZodType;
  actions: { read: Action; write: Action };
  response: z.ZodType;
  createBody: z.ZodType<Create>;
  updateBody: z.ZodType<Update>;
  populate?: readonly string[];
  present(entity: E): unknown;
  create(context: ResourceContext, body: Create): Promise<E> | E;
  update(context: ResourceContext, entity: E, body: Update): Promise<void> | void;
  beforeDelete?(context: ResourceContext, entity: E): Promise<void> | void;
  /** Replaces the hard delete (e.g. geofences are soft-deleted). */
  remove?(context: ResourceContext, entity: E): Promise<void> | void;
  /** GET of one object answers this instead of `present` (e.g. the building detail). */
  // biome-ignore lint/suspicious/noExplicitAny: the query is the resource's own zod output, different for each resource
  detail?: { query?: z.ZodObject; response: z.ZodType; build(context: ResourceContext, entity: E, query: any): Promise<unknown> };
  /** Which objects a caller sees; default: those of their organization. */
  scope?(principal: Principal): FilterQuery<E>;
  /** Lets a caller without the read action read some objects (e.g. a user reads themself). */
  readableWithoutAction?(principal: Principal, entity: E): boolean;
  /**
   * `paginated` answers `{data, metadata}`; otherwise a bare array (what the official client expects there),
   * paged on request and bounded by `maxUnpaged` (gateway/http/whole-or-paged.ts).
   */
  list?: ({ paginated: true } | { paginated: false; maxUnpaged: number }) & {
    query: z.ZodObject;
    // biome-ignore lint/suspicious/noExplicitAny: the query is the resource's own zod output, different for each resource
    filter(query: any, principal: Principal): FilterQuery<E>;
    sortFields?: Record<string, string>;
    defaultSort?: string;
  };
  onChange?(context: ResourceContext, entity: E, change: 'created' | 'updated' | 'deleted'): Promise<void> | void;
}

/** Turns database constraint violations into the client's fault, with a clear message. */
export async function flushOrExplain(em: EntityManager, noun: string): Promise<void> {
  try {
    await em.flush();
  } catch (error) {
    if (error instanceof UniqueConstraintViolationException) throw new ConflictError(`A ${noun} with these values already exists`);
    if (error instanceof ForeignKeyConstraintViolationException)
      throw new ValidationError([{ field: 'body', message: 'refers to something that does not exist' }]);
    throw error;
  }
}

/**
 * A reference in a request body to another object of the caller's organization: `undefined` when the field
 * was not sent, `null` when it was cleared, the object when it exists, else 422 naming the field.
 */
export async function referenced<T extends object>(
  context: ResourceContext,
  entity: EntitySchema<T>,
  id: string | null | undefined,
  field: string,
  noun: string,
): Promise<T | null | undefined> {
  if (id === undefined || id === null) return id;
  const found = await context.em.findOne(entity, { id, organization: context.principal.organizationId } as unknown as FilterQuery<T>);
  if (!found) throw new ValidationError([{ field, message: `no such ${noun} in your organization` }]);
  return found as T;
}

export function resourceRoutes<E extends object, C, U, Q>(storage: Storage, spec: ResourceSpec<E, C, U, Q>): RouteDefinition[] {
  const item = `${spec.path}/:id`;
  const params = z.object({ id: spec.idParam });
  const scopeOf = (principal: Principal) => (spec.scope ? spec.scope(principal) : { organization: principal.organizationId }) as object;
  const scoped = (id: unknown, principal: Principal) => ({ ...scopeOf(principal), id }) as unknown as FilterQuery<E>;

  async function load(context: ResourceContext, id: unknown): Promise<E> {
    const entity = await context.em.findOne(spec.entity, scoped(id, context.principal), { populate: (spec.populate ?? []) as never });
    if (!entity) throw new NotFoundError(capitalise(spec.noun));
    return entity;
  }

  const context = (principal: Principal): ResourceContext => ({ em: storage.em(), principal });
  /** The audit log's name for the collection: the path's last segment (`geofences`, `poi_categories`). */
  const objectType = spec.path.split('/').pop()!;
  const routes: RouteDefinition[] = [];

  if (spec.list) {
    const list = spec.list;
    const query = list.query.extend(list.paginated ? paginationQuery : pagesOnRequestQuery);
    routes.push(
      defineRoute({
        method: 'GET',
        path: spec.path,
        summary: `List ${spec.noun}s of the caller's organization`,
        tags: [spec.tag],
        auth: 'authenticated',
        action: spec.actions.read,
        query,
        response: list.paginated ? paginated(spec.response) : wholeOrPaged(spec.response),
        handler: async ({ principal, query: q }) => {
          const { em } = context(principal);
          const where = { $and: [list.filter(q, principal), scopeOf(principal)] } as unknown as FilterQuery<E>;
          const sorting = { sortFields: list.sortFields ?? { id: 'id' }, defaultSort: list.defaultSort ?? 'id' };
          if (!list.paginated) {
            const entity = spec.entity;
            return {
              body: await listWholeOrPaged(
                em,
                { entity, where, populate: spec.populate, ...sorting, maxUnpaged: list.maxUnpaged, present: spec.present },
                q,
              ),
            };
          }
          const { rows, metadata } = await findPage(em, spec.entity, where, q as unknown as PageRequest, sorting, spec.populate);
          return { body: { data: rows.map((entity) => spec.present(entity)), metadata } };
        },
      }),
    );
  }

  routes.push(
    defineRoute({
      method: 'GET',
      path: item,
      summary: `One ${spec.noun}`,
      tags: [spec.tag],
      auth: 'authenticated',
      params,
      query: spec.detail?.query,
      response: spec.detail?.response ?? spec.response,
      handler: async ({ principal, params: p, query }) => {
        const ctx = context(principal);
        const entity = await load(ctx, p.id);
        const allowed = can(principal.role, spec.actions.read) || spec.readableWithoutAction?.(principal, entity);
        if (!allowed) throw new ForbiddenError(`Your role (${principal.role}) may not read this ${spec.noun}`);
        return { body: spec.detail ? await spec.detail.build(ctx, entity, query) : spec.present(entity) };
      },
    }),
    defineRoute({
      method: 'POST',
      path: spec.path,
      summary: `Create a ${spec.noun}`,
      tags: [spec.tag],
      auth: 'authenticated',
      action: spec.actions.write,
      body: spec.createBody,
      response: spec.response,
      successStatus: 201,
      handler: async ({ principal, body, audit, afterCommit }) => {
        // The write and its audit entry commit together, or neither does.
        const { entity, presented } = await storage.em().transactional(async (em) => {
          const ctx = { em, principal };
          const created = await spec.create(ctx, body);
          await flushOrExplain(em, spec.noun);
          const id = (created as { id: unknown }).id;
          const presented = snapshot(spec.present(await load(ctx, id)));
          await audit.record(em, { objectType, objectId: id as string, before: null, after: presented, sent: body });
          return { entity: created, presented };
        });
        await afterCommit(`${spec.noun} created`, () => spec.onChange?.(context(principal), entity, 'created')); // committed: success whatever the bus says
        return { status: 201, body: presented };
      },
    }),
  );
  for (const method of ['PUT', 'PATCH'] as const) {
    routes.push(
      defineRoute({
        method,
        path: item,
        summary: `Update a ${spec.noun} (only the fields sent change)`,
        tags: [spec.tag],
        auth: 'authenticated',
        action: spec.actions.write,
        params,
        body: spec.updateBody,
        response: spec.response,
        handler: async ({ principal, params: p, body, audit, afterCommit }) => {
          const { entity, presented } = await storage.em().transactional(async (em) => {
            const ctx = { em, principal };
            const entity = await load(ctx, p.id);
            const before = snapshot(spec.present(entity));
            await spec.update(ctx, entity, body);
            await flushOrExplain(em, spec.noun);
            const presented = snapshot(spec.present(entity));
            await audit.record(em, { objectType, objectId: p.id as string, before, after: presented, sent: body });
            return { entity, presented };
          });
          await afterCommit(`${spec.noun} updated`, () => spec.onChange?.(context(principal), entity, 'updated')); // committed: success whatever the bus says
          return { body: presented };
        },
      }),
    );
  }
  routes.push(
    defineRoute({
      method: 'DELETE',
      path: item,
      summary: `Delete a ${spec.noun}`,
      tags: [spec.tag],
      auth: 'authenticated',
      action: spec.actions.write,
      params,
      handler: async ({ principal, params: p, audit, afterCommit }) => {
        const entity = await storage.em().transactional(async (em) => {
          const ctx = { em, principal };
          const entity = await load(ctx, p.id);
          const before = snapshot(spec.present(entity));
          await spec.beforeDelete?.(ctx, entity);
          if (spec.remove) await spec.remove(ctx, entity);
          else em.remove(entity);
          await flushOrExplain(em, spec.noun);
          await audit.record(em, { objectType, objectId: p.id as string, before, after: null });
          return entity;
        });
        await afterCommit(`${spec.noun} deleted`, () => spec.onChange?.(context(principal), entity, 'deleted')); // committed: success whatever the bus says
        return { status: 204 };
      },
    }),
  );
  return routes;
}

/** The presentation as JSON stores it, taken before an update can mutate what it refers to. */
const snapshot = (value: unknown): unknown => JSON.parse(JSON.stringify(value ?? null));

const capitalise = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);
