import { z } from 'zod';

/**
 * Query parameter forms shared by the routes (gateway/http/query-schemas.ts) and the report parameters. Arrays
 * arrive as `a=1,2`, `a=1&a=2` or `a[]=1&a[]=2` (the query parser folds the last two); an empty list is refused
 * (the spec: at least one item). The OpenAPI writer recognizes this shape and documents the item rules.
 */
export function listParam<T extends z.ZodType>(item: T) {
  return z
    .union([z.string(), z.array(z.string())])
    .transform((value) =>
      (Array.isArray(value) ? value : [value])
        .flatMap((part) => part.split(','))
        .map((part) => part.trim())
        .filter((part) => part !== ''),
    )
    .pipe(z.array(item).min(1, 'at least one item') as unknown as z.ZodType<z.output<T>[], string[]>);
}

export const booleanParam = z.enum(['true', 'false']).transform((value) => value === 'true');
