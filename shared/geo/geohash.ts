/**
 * Standard base32 geohash (interleaved longitude/latitude bisection, longitude first). Heatmaps bucket
 * positions by precision-10 cells (about 1.2 m x 0.6 m) and report each cell by its centre.
 */

const BASE32 = '0123456789bcdefghjkmnpqrstuvwxyz';
const DECODE = new Map([...BASE32].map((c, i) => [c, i]));
// 12 characters are 60 bits, a cell of a few centimetres: already finer than any position fix.
export const MAX_GEOHASH_PRECISION = 12;

export interface GeohashBounds {
  minLat: number;
  minLng: number;
  maxLat: number;
  maxLng: number;
}

/** Throws RangeError on a coordinate outside WGS84 ranges or a precision outside 1..12. */
export function encodeGeohash(lat: number, lng: number, precision: number): string {
  if (!(lat >= -90 && lat <= 90)) throw new RangeError(`latitude must be within [-90, 90], got ${lat}`);
  if (!(lng >= -180 && lng <= 180)) throw new RangeError(`longitude must be within [-180, 180], got ${lng}`);
  if (!Number.isInteger(precision) || precision < 1 || precision > MAX_GEOHASH_PRECISION) {
    throw new RangeError(`geohash precision must be an integer in 1..${MAX_GEOHASH_PRECISION}, got ${precision}`);
  }
  let minLat = -90;
  let maxLat = 90;
  let minLng = -180;
  let maxLng = 180;
  let hash = '';
  let evenBit = true;
  for (let c = 0; c < precision; c++) {
    let index = 0;
    for (let bit = 0; bit < 5; bit++) {
      // The midpoints are dyadic fractions of 180 and 360, exact in a double, so no cell edge is misjudged.
      if (evenBit) {
        const mid = (minLng + maxLng) / 2;
        if (lng >= mid) {
          index = index * 2 + 1;
          minLng = mid;
        } else {
          index *= 2;
          maxLng = mid;
        }
      } else {
        const mid = (minLat + maxLat) / 2;
        if (lat >= mid) {
          index = index * 2 + 1;
          minLat = mid;
        } else {
          index *= 2;
          maxLat = mid;
        }
      }
      evenBit = !evenBit;
    }
    hash += BASE32[index];
  }
  return hash;
}

/** Case-insensitive; throws RangeError on an empty hash or a character outside the geohash alphabet. */
export function decodeGeohashBounds(hash: string): GeohashBounds {
  if (hash.length === 0 || hash.length > MAX_GEOHASH_PRECISION) {
    throw new RangeError(`geohash length must be 1..${MAX_GEOHASH_PRECISION}, got ${hash.length}`);
  }
  const bounds = { minLat: -90, maxLat: 90, minLng: -180, maxLng: 180 };
  let evenBit = true;
  for (const char of hash.toLowerCase()) {
    const index = DECODE.get(char);
    if (index === undefined) throw new RangeError(`invalid geohash character '${char}' in '${hash}'`);
    for (let bit = 4; bit >= 0; bit--) {
      const set = ((index >> bit) & 1) === 1;
      if (evenBit) {
        const mid = (bounds.minLng + bounds.maxLng) / 2;
        if (set) bounds.minLng = mid;
        else bounds.maxLng = mid;
      } else {
        const mid = (bounds.minLat + bounds.maxLat) / 2;
        if (set) bounds.minLat = mid;
        else bounds.maxLat = mid;
      }
      evenBit = !evenBit;
    }
  }
  return bounds;
}

export function decodeGeohashCenter(hash: string): { lat: number; lng: number } {
  const b = decodeGeohashBounds(hash);
  return { lat: (b.minLat + b.maxLat) / 2, lng: (b.minLng + b.maxLng) / 2 };
}
