import { z } from 'zod';
import { ValidationError } from '../../shared/errors.js';

/** Query parameter schemas shared by every route; the list and boolean forms live in shared/, where the report parameters use them too. */
export { booleanParam, listParam } from '../../shared/query-params.js';
export const idParam = z.coerce.number().int().positive();
export const uuidParam = z.uuid();

/** The last page anyone may ask for: a million pages of up to 1,000 rows is past any list this API serves. */
export const MAX_PAGE = 1_000_000;

export const paginationQuery = {
  /** 0-based page number, returned as `metadata.number`; bounded so the offset stays a small integer. */
  page: z.coerce.number().int().min(0).max(MAX_PAGE).default(0),
  /** Page size, 1 to 1,000. */
  size: z.coerce.number().int().min(1).max(1000).default(20),
  /** `field` or `field,asc|desc`. */
  sort: z
    .string()
    .regex(/^[a-z_]+(,(asc|desc))?$/i, 'field or field,asc|desc')
    .optional(),
  /** Direction when `sort` names only the field. */
  direction: z.enum(['asc', 'desc', 'ASC', 'DESC']).optional(),
};

export interface PageRequest {
  page: number;
  size: number;
  sort?: string;
  direction?: string;
}

export interface PageMetadata {
  first: boolean;
  last: boolean;
  total_pages: number;
  total_elements: number;
  number_of_elements: number;
  size: number;
  number: number;
}

export const pageMetadataSchema = z.object({
  first: z.boolean(),
  last: z.boolean(),
  total_pages: z.number().int(),
  total_elements: z.number().int(),
  number_of_elements: z.number().int(),
  size: z.number().int(),
  number: z.number().int(),
});

export const paginated = <T extends z.ZodType>(item: T) => z.object({ data: z.array(item), metadata: pageMetadataSchema });

export function pageMetadata(request: PageRequest, total: number, returned: number): PageMetadata {
  const totalPages = Math.ceil(total / request.size);
  return {
    first: request.page === 0,
    last: request.page >= totalPages - 1,
    total_pages: totalPages,
    total_elements: total,
    number_of_elements: returned,
    size: request.size,
    number: request.page,
  };
}

/** Turns `sort`/`direction` into an ORM orderBy over the allowed fields (API name -> entity property). */
export function orderByOf(request: PageRequest, allowed: Record<string, string>, fallback: string): Record<string, 'asc' | 'desc'> {
  const [field, inlineDirection] = (request.sort ?? fallback).split(',');
  const name = field!.toLowerCase();
  // Own fields only: `constructor` or `__proto__` must not reach Object.prototype.
  const property = Object.hasOwn(allowed, name) ? allowed[name] : undefined;
  const direction = (inlineDirection ?? request.direction ?? 'asc').toLowerCase() as 'asc' | 'desc';
  if (!property) {
    throw new ValidationError([{ field: 'query.sort', message: `sortable fields: ${Object.keys(allowed).join(', ')}` }]);
  }
  return property === 'id' ? { id: direction } : { [property]: direction, id: 'asc' };
}
