/**
 * Georeferencing of a building: floor cartesians (metres, origin at the floorplan's bottom-left corner, x along
 * the width, y along the length) to WGS84 and back.
 *
 * Rotation convention. The spec only says "radians, starting from the west, counter-clockwise", which fixes the
 * sense but not what is measured. We read it as: `rotation` is the angle of the floorplan's x axis measured
 * counter-clockwise (seen from above, so east turning towards north) from east. At rotation 0 the floorplan
 * sits unrotated on a north-up map: x points east, y points north, and the origin corner (bottom-left) is the
 * south-west one, so the plan "starts from the west". At pi/2 x points north. Everything here (toGeo,
 * toCartesian, corners, deriveGeometryFromCorners) uses this one reading, so a building round-trips even if
 * the spec meant something else.
 *
 * Projection. A local tangent plane at the building centre, scaled by the WGS84 meridional (M) and
 * prime-vertical (N) radii of curvature at the centre's latitude: north = M * dLat, east = N * cos(lat0) * dLng.
 * It is linear in (dLat, dLng), so the inverse is exact to floating point whatever the distance. Its scale
 * error (the ellipsoid's curvature changing away from the centre) is below 1 mm for a 200 m building and grows
 * with the square of the size: roughly (tan(lat0) * d / R) * d, about 7 cm for a 1 km building at 40 degrees.
 */

export interface LatLng {
  lat: number;
  lng: number;
}

export interface Cartesian {
  x: number;
  y: number;
}

export interface Dimensions {
  width: number;
  length: number;
}

export interface BuildingGeometry {
  location: LatLng;
  dimensions: Dimensions;
  rotation: number;
}

/** Order as the spec lists `corners`: topleft, topright, bottomright, bottomleft. */
export type Corners = [LatLng, LatLng, LatLng, LatLng];

export interface BuildingTransform {
  readonly geometry: Readonly<BuildingGeometry>;
  toGeo(point: Cartesian): LatLng;
  toCartesian(point: LatLng): Cartesian;
  corners(): Corners;
}

const WGS84_A = 6378137;
const WGS84_F = 1 / 298.257223563;
const WGS84_E2 = WGS84_F * (2 - WGS84_F);
const DEG = Math.PI / 180;
// cos(lat) vanishes at the poles, where east-west metres per degree blow up; no building needs it.
export const MAX_ABS_LAT = 89.9;

/** Meridional and prime-vertical radii of curvature (metres) of the WGS84 ellipsoid at a latitude. */
export function radiiOfCurvature(latDeg: number): { meridional: number; primeVertical: number } {
  const s = Math.sin(latDeg * DEG);
  const w2 = 1 - WGS84_E2 * s * s;
  return {
    meridional: (WGS84_A * (1 - WGS84_E2)) / (w2 * Math.sqrt(w2)),
    primeVertical: WGS84_A / Math.sqrt(w2),
  };
}

/** Longitude difference folded into [-180, 180) so a building across the antimeridian stays contiguous. */
function wrapLng(lng: number): number {
  return ((((lng + 180) % 360) + 360) % 360) - 180;
}

function checkGeometry({ location, dimensions, rotation }: BuildingGeometry): void {
  if (!Number.isFinite(location.lat) || Math.abs(location.lat) > MAX_ABS_LAT) {
    throw new RangeError(`building latitude must be within +-${MAX_ABS_LAT}, got ${location.lat}`);
  }
  if (!Number.isFinite(location.lng)) throw new RangeError(`building longitude must be finite, got ${location.lng}`);
  if (!(dimensions.width > 0) || !(dimensions.length > 0) || !Number.isFinite(dimensions.width + dimensions.length)) {
    throw new RangeError('building width and length must be positive metres');
  }
  if (!Number.isFinite(rotation)) throw new RangeError(`building rotation must be finite, got ${rotation}`);
}

/** Throws RangeError on a geometry no transform can be built from; callers validate API input before this. */
export function createBuildingTransform(geometry: BuildingGeometry): BuildingTransform {
  checkGeometry(geometry);
  const { location, dimensions, rotation } = geometry;
  const { meridional, primeVertical } = radiiOfCurvature(location.lat);
  const metresPerDegLat = meridional * DEG;
  const metresPerDegLng = primeVertical * Math.cos(location.lat * DEG) * DEG;
  const cos = Math.cos(rotation);
  const sin = Math.sin(rotation);
  const halfW = dimensions.width / 2;
  const halfL = dimensions.length / 2;

  const toGeo = ({ x, y }: Cartesian): LatLng => {
    const dx = x - halfW;
    const dy = y - halfL;
    const east = dx * cos - dy * sin;
    const north = dx * sin + dy * cos;
    return { lat: location.lat + north / metresPerDegLat, lng: wrapLng(location.lng + east / metresPerDegLng) };
  };

  const toCartesian = ({ lat, lng }: LatLng): Cartesian => {
    const north = (lat - location.lat) * metresPerDegLat;
    const east = wrapLng(lng - location.lng) * metresPerDegLng;
    return { x: east * cos + north * sin + halfW, y: -east * sin + north * cos + halfL };
  };

  return {
    geometry: { location: { ...location }, dimensions: { ...dimensions }, rotation },
    toGeo,
    toCartesian,
    corners: () => [
      toGeo({ x: 0, y: dimensions.length }),
      toGeo({ x: dimensions.width, y: dimensions.length }),
      toGeo({ x: dimensions.width, y: 0 }),
      toGeo({ x: 0, y: 0 }),
    ],
  };
}

/**
 * Whether a WGS84 point falls inside the building outline (boundary included): how an outdoor fix is assigned
 * to a building. `dimensions` is normally `transform.geometry.dimensions`.
 */
export function containsGeo(transform: BuildingTransform, dimensions: Dimensions, point: LatLng): boolean {
  const { x, y } = transform.toCartesian(point);
  return x >= 0 && x <= dimensions.width && y >= 0 && y <= dimensions.length;
}

/**
 * Inverse of `corners()`: the centre, size and rotation of a building given its four corners (spec order).
 * Opposite sides are averaged, so slightly non-rectangular input (hand-placed corners) gives the best-fitting
 * rectangle rather than favouring one side. Rotation comes back in (-pi, pi].
 */
export function deriveGeometryFromCorners(corners: readonly LatLng[]): BuildingGeometry {
  if (corners.length !== 4) throw new RangeError(`a building has 4 corners, got ${corners.length}`);
  // The projection is affine in (lat, lng), so the mean of the corners in degrees is the centre in metres too.
  const location = {
    lat: corners.reduce((sum, c) => sum + c.lat, 0) / 4,
    lng: wrapLng(corners[0].lng + corners.reduce((sum, c) => sum + wrapLng(c.lng - corners[0].lng), 0) / 4),
  };
  const { meridional, primeVertical } = radiiOfCurvature(location.lat);
  const local = corners.map((c) => ({
    east: wrapLng(c.lng - location.lng) * primeVertical * Math.cos(location.lat * DEG) * DEG,
    north: (c.lat - location.lat) * meridional * DEG,
  }));
  const [tl, tr, br, bl] = local;
  // Width runs along +x (left to right), length along -y (top to bottom), as in the spec's definitions.
  const xAxis = { east: tr.east - tl.east + br.east - bl.east, north: tr.north - tl.north + br.north - bl.north };
  const yAxis = { east: tl.east - bl.east + tr.east - br.east, north: tl.north - bl.north + tr.north - br.north };
  return {
    location,
    dimensions: { width: Math.hypot(xAxis.east, xAxis.north) / 2, length: Math.hypot(yAxis.east, yAxis.north) / 2 },
    rotation: Math.atan2(xAxis.north, xAxis.east),
  };
}
