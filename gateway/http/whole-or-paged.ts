import type { EntityManager } from '@mikro-orm/postgresql';
import type { EntitySchema, FilterQuery } from '@mikro-orm/core';
import { z } from 'zod';
import { ValidationError } from '../../shared/errors.js';
import { MAX_PAGE, orderByOf, pageMetadata, paginated, paginationQuery } from './query-schemas.js';

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

export async function listWholeOrPaged<E extends object>(
  em: EntityManager,
  list: WholeOrPagedList<E>,
  query: PagesOnRequest,
): Promise<unknown> {
  const populate = (list.populate ?? []) as never;
  const request = {
    page: query.page ?? 0,
    size: query.size ?? paginationQuery.size.parse(undefined),
    sort: query.sort,
    direction: query.direction,
  };
  const orderBy = orderByOf(request, list.sortFields, list.defaultSort) as never;
  if (query.page === undefined && query.size === undefined) {
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
  const [rows, total] = await em.findAndCount(list.entity, list.where, {
    populate,
    orderBy,
    limit: request.size,
    offset: request.page * request.size,
  });
  return { data: rows.map((entity) => list.present(entity)), metadata: pageMetadata(request, total, rows.length) };
}
