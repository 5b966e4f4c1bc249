import { describe, expect, it } from 'vitest';
import { type LatLng, containsGeo, createBuildingTransform, deriveGeometryFromCorners } from '../../../shared/geo/building-transform.js';

const madrid = {
  location: { lat: 40.4168, lng: -3.7038 },
  dimensions: { width: 120, length: 80 },
  rotation: 0.7,
};

/**
 * Straight-line distance between two surface points through WGS84 ECEF coordinates. A spherical haversine is
 * off by 0.1-0.3 % (10-30 cm over 120 m) from the ellipsoid, too coarse to check 1 cm; the chord differs from
 * the geodesic by d^3 / (24 R^2), nanometres at building scale, and shares no formula with the code under test.
 */
function chordMetres(p: LatLng, q: LatLng): number {
  const a = 6378137;
  const e2 = (1 / 298.257223563) * (2 - 1 / 298.257223563);
  const ecef = ({ lat, lng }: LatLng) => {
    const phi = (lat * Math.PI) / 180;
    const lambda = (lng * Math.PI) / 180;
    const n = a / Math.sqrt(1 - e2 * Math.sin(phi) ** 2);
    return [n * Math.cos(phi) * Math.cos(lambda), n * Math.cos(phi) * Math.sin(lambda), n * (1 - e2) * Math.sin(phi)];
  };
  const [x1, y1, z1] = ecef(p);
  const [x2, y2, z2] = ecef(q);
  return Math.hypot(x2 - x1, y2 - y1, z2 - z1);
}

function angleDiff(a: number, b: number): number {
  return Math.abs(Math.atan2(Math.sin(a - b), Math.cos(a - b)));
}

describe('building transform', () => {
  const t = createBuildingTransform(madrid);

  it('round-trips cartesian -> geo -> cartesian under 1 cm, inside and outside the building', () => {
    const points = [
      { x: 0, y: 0 },
      { x: 120, y: 0 },
      { x: 120, y: 80 },
      { x: 0, y: 80 },
      // A few kilometres out: the inverse must stay exact far beyond one building's size.
      { x: 3000, y: -2500 },
      { x: -2000, y: 3000 },
    ];
    for (let x = -200; x <= 320; x += 40) for (let y = -150; y <= 230; y += 38) points.push({ x, y });
    for (const p of points) {
      const back = t.toCartesian(t.toGeo(p));
      expect(Math.hypot(back.x - p.x, back.y - p.y)).toBeLessThan(0.01);
    }
  });

  it('round-trips geo -> cartesian -> geo under 1 cm', () => {
    for (let dLat = -0.003; dLat <= 0.003; dLat += 0.0005) {
      for (let dLng = -0.004; dLng <= 0.004; dLng += 0.0005) {
        const p = { lat: madrid.location.lat + dLat, lng: madrid.location.lng + dLng };
        expect(chordMetres(p, t.toGeo(t.toCartesian(p)))).toBeLessThan(0.01);
      }
    }
  });

  it('maps the floorplan centre to the building location', () => {
    const c = t.toGeo({ x: 60, y: 40 });
    expect(chordMetres(c, madrid.location)).toBeLessThan(0.001);
  });

  it('puts corners width apart along the top edge and length apart down the right edge', () => {
    const [tl, tr, br, bl] = t.corners();
    expect(Math.abs(chordMetres(tl, tr) - 120)).toBeLessThan(0.01);
    expect(Math.abs(chordMetres(tr, br) - 80)).toBeLessThan(0.01);
    expect(Math.abs(chordMetres(br, bl) - 120)).toBeLessThan(0.01);
    expect(Math.abs(chordMetres(bl, tl) - 80)).toBeLessThan(0.01);
    expect(Math.abs(chordMetres(tl, br) - Math.hypot(120, 80))).toBeLessThan(0.01);
  });

  it('lists corners topleft, topright, bottomright, bottomleft: clockwise on a north-up map', () => {
    const corners = t.corners();
    expect(chordMetres(corners[3], t.toGeo({ x: 0, y: 0 }))).toBeLessThan(0.001);
    expect(chordMetres(corners[1], t.toGeo({ x: 120, y: 80 }))).toBeLessThan(0.001);
    const k = Math.cos((madrid.location.lat * Math.PI) / 180);
    let twiceArea = 0;
    for (let i = 0; i < 4; i++) {
      const p = corners[i];
      const q = corners[(i + 1) % 4];
      twiceArea += p.lng * k * q.lat - q.lng * k * p.lat;
    }
    expect(twiceArea).toBeLessThan(0);
  });

  it('with rotation 0 points x east and y north, origin at the south-west corner', () => {
    const flat = createBuildingTransform({ ...madrid, rotation: 0 });
    const west = flat.toGeo({ x: 0, y: 40 });
    const east = flat.toGeo({ x: 120, y: 40 });
    expect(east.lng).toBeGreaterThan(west.lng);
    expect(Math.abs(east.lat - west.lat)).toBeLessThan(1e-9);
    const [tl, , , bl] = flat.corners();
    expect(tl.lat).toBeGreaterThan(bl.lat);
    expect(Math.abs(tl.lng - bl.lng)).toBeLessThan(1e-9);
  });

  it('turns counter-clockwise: with rotation pi/2 x points north', () => {
    const turned = createBuildingTransform({ ...madrid, rotation: Math.PI / 2 });
    const start = turned.toGeo({ x: 0, y: 40 });
    const end = turned.toGeo({ x: 120, y: 40 });
    expect(end.lat).toBeGreaterThan(start.lat);
    expect(Math.abs(end.lng - start.lng)).toBeLessThan(1e-9);
    expect(Math.abs(chordMetres(start, end) - 120)).toBeLessThan(0.01);
  });

  it('keeps a building across the antimeridian contiguous', () => {
    const dateLine = createBuildingTransform({ ...madrid, rotation: 0, location: { lat: -16.5, lng: 179.9998 } });
    const [tl, tr] = dateLine.corners();
    expect(Math.sign(tl.lng)).not.toBe(Math.sign(tr.lng));
    expect(Math.abs(chordMetres(tl, tr) - 120)).toBeLessThan(0.01);
    const back = dateLine.toCartesian(tr);
    expect(Math.hypot(back.x - 120, back.y - 80)).toBeLessThan(0.01);
  });

  it('rejects geometry no transform can be built from', () => {
    expect(() => createBuildingTransform({ ...madrid, dimensions: { width: 0, length: 80 } })).toThrow(RangeError);
    expect(() => createBuildingTransform({ ...madrid, location: { lat: 90, lng: 0 } })).toThrow(RangeError);
    expect(() => createBuildingTransform({ ...madrid, rotation: Number.NaN })).toThrow(RangeError);
  });
});

describe('containsGeo', () => {
  const t = createBuildingTransform(madrid);
  const dims = madrid.dimensions;

  it('contains the centre and points just inside each edge', () => {
    expect(containsGeo(t, dims, madrid.location)).toBe(true);
    expect(containsGeo(t, dims, t.toGeo({ x: 0.05, y: 40 }))).toBe(true);
    expect(containsGeo(t, dims, t.toGeo({ x: 60, y: 79.95 }))).toBe(true);
  });

  it('excludes points just outside each edge', () => {
    expect(containsGeo(t, dims, t.toGeo({ x: -0.05, y: 40 }))).toBe(false);
    expect(containsGeo(t, dims, t.toGeo({ x: 120.05, y: 40 }))).toBe(false);
    expect(containsGeo(t, dims, t.toGeo({ x: 60, y: -0.05 }))).toBe(false);
    expect(containsGeo(t, dims, t.toGeo({ x: 60, y: 80.05 }))).toBe(false);
  });

  it('follows the rotated outline, not its lat/lng bounding box', () => {
    const corners = t.corners();
    const corner = { lat: Math.max(...corners.map((c) => c.lat)), lng: Math.max(...corners.map((c) => c.lng)) };
    expect(containsGeo(t, dims, corner)).toBe(false);
  });
});

describe('deriveGeometryFromCorners', () => {
  it.each([0.7, -2.5, Math.PI])('recovers location, dimensions and rotation %s from corners', (rotation) => {
    const corners = createBuildingTransform({ ...madrid, rotation }).corners();
    const derived = deriveGeometryFromCorners(corners);
    expect(chordMetres(derived.location, madrid.location)).toBeLessThan(0.001);
    expect(derived.dimensions.width).toBeCloseTo(120, 4);
    expect(derived.dimensions.length).toBeCloseTo(80, 4);
    expect(angleDiff(derived.rotation, rotation)).toBeLessThan(1e-7);
  });

  it('rejects anything but four corners', () => {
    expect(() => deriveGeometryFromCorners([madrid.location])).toThrow(RangeError);
  });
});
