import type { EntityManager } from '@mikro-orm/postgresql';
import type { EntitySchema, FilterQuery } from '@mikro-orm/core';
import { z } from 'zod';
import { ValidationError } from '../../shared/errors.js';
import { MAX_PAGE, orderByOf, pageMetadata, paginated, paginationQuery, type PageMetadata, type PageRequest } from './query-schemas.js';

/**
 * Lists the spec and the official client read whole, as a bare array (floors, POIs, POI categories, groups), are
 * paged on request (L3): with `page` or `size` they answer `{data, metadata}` like users and devices; without,
 * the whole array, up to LIST_MAX_UNPAGED_ITEMS items (422 past it, naming the way out).
 */
export const pagesOnRequestQuery = {
  page: z.coerce.number().int().min(0).max(MAX_PAGE).optional().describe('0-based page; with page or size the answer is {data, metadata}'),
  size: z.coerce.number().int().min(1).max(1000).optional().describe('Page size, 1 to 1,000 (default 20 when only page is sent)'),
  sort: paginationQuery.sort,
  direction: paginationQuery.direction,
};

export interface PagesOnRequest {
  page?: number;
  size?: number;
  sort?: string;
  direction?: string;
}

export const wholeOrPaged = <T extends z.ZodType>(item: T) =>
  z
    .union([z.array(item), paginated(item)])
    .describe('The whole list as an array (at most LIST_MAX_UNPAGED_ITEMS items), or {data, metadata} when page or size is sent');

export interface WholeOrPagedList<E extends object> {
  entity: EntitySchema<E>;
  where: FilterQuery<E>;
  populate?: readonly string[];
  /** API name -> entity property, for `sort`. */
  sortFields: Record<string, string>;
  defaultSort: string;
  /** LIST_MAX_UNPAGED_ITEMS: the longest list answered whole. */
  maxUnpaged: number;
  present(entity: E): unknown;
}

/** How a list sorts: API name -> entity property, and the API name it sorts by when `sort` is absent. */
export interface Sorting {
  sortFields: Record<string, string>;
  defaultSort: string;
}

/**
 * One page of an entity list, sorted by the request's `sort`/`direction` over the allowed fields (422 for another),
 * and the page's metadata: the `{data, metadata}` answer before presenting. The ORM's typed order and populate
 * are built here, from the API's names, so callers hold no casts.
 */
export async function findPage<E extends object>(
  em: EntityManager,
  entity: EntitySchema<E>,
  where: FilterQuery<E>,
  page: PageRequest,
  sorting: Sorting,
  populate: readonly string[] = [],
): Promise<{ rows: E[]; metadata: PageMetadata }> {
  const orderBy = orderByOf(page, sorting.sortFields, sorting.defaultSort) as never;
  const [rows, total] = await em.findAndCount(entity, where, {
    populate: populate as never,
    orderBy,
    limit: page.size,
    offset: page.page * page.size,
  });
  return { rows, metadata: pageMetadata(page, total, rows.length) };
}

export async function listWholeOrPaged<E extends object>(
  em: EntityManager,
  list: WholeOrPagedList<E>,
  query: PagesOnRequest,
): Promise<unknown> {
  const request = {
    page: query.page ?? 0,
    size: query.size ?? paginationQuery.size.parse(undefined),
    sort: query.sort,
    direction: query.direction,
  };
  if (query.page === undefined && query.size === undefined) {
    const orderBy = orderByOf(request, list.sortFields, list.defaultSort) as never;
    const populate = (list.populate ?? []) as never;
    const rows = await em.find(list.entity, list.where, { populate, orderBy, limit: list.maxUnpaged + 1 });
    if (rows.length > list.maxUnpaged) {
      throw new ValidationError([
        {
          field: 'query.size',
          message: `this list holds more than ${list.maxUnpaged} items (LIST_MAX_UNPAGED_ITEMS): ask for it by pages with page and size`,
        },
      ]);
    }
    return rows.map((entity) => list.present(entity));
  }
  const { rows, metadata } = await findPage(em, list.entity, list.where, request, list, list.populate);
  return { data: rows.map((entity) => list.present(entity)), metadata };
}
