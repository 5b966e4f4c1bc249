import { z } from 'zod';
import { ValidationError } from '../../shared/errors.js';
import type { BuildingTransform } from '../../shared/geo/building-transform.js';

export const latitude = z.number().min(-90, 'latitude must be between -90 and 90').max(90, 'latitude must be between -90 and 90');
export const longitude = z.number().min(-180, 'longitude must be between -180 and 180').max(180, 'longitude must be between -180 and 180');
export const latLngInput = z.object({ lat: latitude, lng: longitude });
const metres = z.number().finite();
export const cartesianInput = z.object({ x: metres, y: metres });

/**
 * Where something is on a floor, given either way: `cartesians {x, y}` (metres from the floorplan's bottom-left
 * corner) or `georeferences {lat, lng}`, also flat (`x`, `y`, `lat`, `lng`) as the official client reads them.
 * When both are sent, the cartesians win: they are what a floorplan editor measured.
 */
export const positionInput = z.object({
  floor_id: z.coerce.number().int().positive(),
  radius: z.number().min(0).optional(),
  cartesians: cartesianInput.optional(),
  georeferences: latLngInput.optional(),
  x: metres.optional(),
  y: metres.optional(),
  lat: latitude.optional(),
  lng: longitude.optional(),
});
export type PositionInput = z.infer<typeof positionInput>;

export interface Placed {
  x: number;
  y: number;
  lat: number;
  lng: number;
}

/** Both coordinate systems for one point, derived through the building's transform. */
export function place(transform: BuildingTransform, input: Omit<PositionInput, 'floor_id' | 'radius'>, field: string): Placed {
  const cartesian = input.cartesians ?? (input.x !== undefined && input.y !== undefined ? { x: input.x, y: input.y } : undefined);
  if (cartesian) return { ...cartesian, ...transform.toGeo(cartesian) };
  const geo = input.georeferences ?? (input.lat !== undefined && input.lng !== undefined ? { lat: input.lat, lng: input.lng } : undefined);
  if (geo) return { ...geo, ...transform.toCartesian(geo) };
  throw new ValidationError([{ field, message: 'give cartesians {x, y} or georeferences {lat, lng}' }]);
}

/**
 * `{key, value}` pairs, both strings as the spec (2.1) and the official client's `CustomField` type say. A value of
 * another JSON type is refused (422) rather than stored as its text: coercion turned an object into the string
 * "[object Object]" and a number into one that no longer reads back as what was sent.
 */
export const customFieldsInput = z
  .array(
    z.object({
      key: z.string().max(200),
      value: z.string().max(10_000).describe('A string; numbers, booleans, null, objects and arrays are refused (422)'),
    }),
  )
  .max(200);
