import { describe, expect, it } from 'vitest';
import { decodeGeohashBounds, decodeGeohashCenter, encodeGeohash } from '../../../shared/geo/geohash.js';

// Deterministic so a failure reproduces; spread over the whole globe, poles and antimeridian included.
function* pseudoRandomPoints(count: number): Generator<[number, number]> {
  let seed = 12345;
  const next = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  for (let i = 0; i < count; i++) yield [next() * 180 - 90, next() * 360 - 180];
}

describe('encodeGeohash', () => {
  it('matches published vectors', () => {
    expect(encodeGeohash(57.64911, 10.40744, 11)).toBe('u4pruydqqvj');
    expect(encodeGeohash(42.6, -5.6, 5)).toBe('ezs42');
    expect(encodeGeohash(37.8324, 112.5584, 9)).toBe('ww8p1r4t8');
  });

  it('truncates: a shorter hash is a prefix of a longer one', () => {
    expect(encodeGeohash(57.64911, 10.40744, 10)).toBe('u4pruydqqv');
    expect(encodeGeohash(57.64911, 10.40744, 1)).toBe('u');
  });

  it('puts the extreme corners of the globe in the first and last cells', () => {
    expect(encodeGeohash(-90, -180, 5)).toBe('00000');
    expect(encodeGeohash(90, 180, 5)).toBe('zzzzz');
  });

  it('puts a point on a cell edge in the cell north-east of it', () => {
    expect(encodeGeohash(0, 0, 5)).toBe('s0000');
  });

  it('rejects out-of-range coordinates and precisions', () => {
    expect(() => encodeGeohash(91, 0, 5)).toThrow(RangeError);
    expect(() => encodeGeohash(0, -180.5, 5)).toThrow(RangeError);
    expect(() => encodeGeohash(Number.NaN, 0, 5)).toThrow(RangeError);
    expect(() => encodeGeohash(0, 0, 0)).toThrow(RangeError);
    expect(() => encodeGeohash(0, 0, 13)).toThrow(RangeError);
    expect(() => encodeGeohash(0, 0, 2.5)).toThrow(RangeError);
  });
});

describe('decodeGeohashCenter', () => {
  it('decodes the published example to the middle of its cell', () => {
    const { lat, lng } = decodeGeohashCenter('ezs42');
    expect(lat).toBeCloseTo(42.605, 3);
    expect(lng).toBeCloseTo(-5.603, 3);
    const b = decodeGeohashBounds('ezs42');
    expect(b.maxLat - b.minLat).toBe(180 / 2 ** 12);
    expect(b.maxLng - b.minLng).toBe(360 / 2 ** 13);
    expect(lat).toBe((b.minLat + b.maxLat) / 2);
  });

  it('decodes other published examples', () => {
    const ww = decodeGeohashCenter('ww8p1r4t8');
    expect(ww.lat).toBeCloseTo(37.832386, 6);
    expect(ww.lng).toBeCloseTo(112.558386, 6);
    const u4 = decodeGeohashCenter('u4pruy');
    expect(u4.lat).toBeCloseTo(57.648, 3);
    expect(u4.lng).toBeCloseTo(10.41, 3);
  });

  it('accepts upper case and rejects characters outside the alphabet', () => {
    expect(decodeGeohashCenter('EZS42')).toEqual(decodeGeohashCenter('ezs42'));
    expect(() => decodeGeohashCenter('ezs4a')).toThrow(RangeError);
    expect(() => decodeGeohashCenter('')).toThrow(RangeError);
  });

  it('at heatmap precision 10, keeps each point within half a cell of its centre and re-encodes to the same hash', () => {
    const halfLat = 180 / 2 ** 25 / 2;
    const halfLng = 360 / 2 ** 25 / 2;
    for (const [lat, lng] of pseudoRandomPoints(2000)) {
      const hash = encodeGeohash(lat, lng, 10);
      const centre = decodeGeohashCenter(hash);
      expect(Math.abs(centre.lat - lat)).toBeLessThanOrEqual(halfLat);
      expect(Math.abs(centre.lng - lng)).toBeLessThanOrEqual(halfLng);
      expect(encodeGeohash(centre.lat, centre.lng, 10)).toBe(hash);
    }
  });
});
