import { z } from 'zod';
import type {
  Building,
  BuildingPaths,
  CartographyEvent,
  Circle,
  Floor,
  Geofence,
  InfrastructureItem,
  Poi,
  PoiCategory,
} from '../../shared/storage/entities/index.js';
import type { BuildingTransform } from '../../shared/geo/building-transform.js';

/**
 * Response shapes of spec parts 2.1 to 2.8, as zod schemas (they document the OpenAPI) and the functions
 * that build them. Field names follow the spec's tables, including its awkward ones (`project_id`, `lng`).
 */
const iso = (date: Date) => date.toISOString();
const imageUrl = (id: string | null | undefined) => (id ? `/api/v1/images/${id}` : null);
const latLng = z.object({ lat: z.number(), lng: z.number() });
const customFields = z.array(z.object({ key: z.string(), value: z.string() }));
const timestamps = { created_at: z.string(), updated_at: z.string() };

export const buildingSchema = z.object({
  id: z.number().int(),
  user_uuid: z.string().nullable().describe('The user who created the building'),
  name: z.string(),
  description: z.string().nullable(),
  ...timestamps,
  location: latLng,
  corners: z.array(latLng).length(4).describe('topleft, topright, bottomright, bottomleft'),
  dimensions: z.object({ width: z.number(), length: z.number() }),
  rotation: z.number().describe('Radians, counter-clockwise from east to the floorplan x axis'),
  custom_fields: customFields,
  picture_url: z.string().nullable(),
  picture_thumb_url: z.string().nullable(),
  server_url: z.string().nullable(),
  calibration_model: z.null(),
  info: z.string().nullable(),
});

export function presentBuilding(building: Building, transform: BuildingTransform): z.infer<typeof buildingSchema> {
  return {
    id: building.id,
    user_uuid: building.userId ?? null,
    name: building.name,
    description: building.description ?? null,
    created_at: iso(building.createdAt),
    updated_at: iso(building.updatedAt),
    location: { lat: building.locationLat, lng: building.locationLng },
    corners: transform.corners(),
    dimensions: { width: building.width, length: building.length },
    rotation: building.rotation,
    custom_fields: building.customFields,
    picture_url: imageUrl(building.pictureId),
    picture_thumb_url: imageUrl(building.pictureId),
    server_url: null,
    calibration_model: null,
    info: building.info ?? null,
  };
}

/** `view=compact`: what a building picker needs, without the heavy text fields. */
export function presentCompactBuilding(building: Building, transform: BuildingTransform) {
  const full = presentBuilding(building, transform);
  return {
    id: full.id,
    name: full.name,
    location: full.location,
    corners: full.corners,
    dimensions: full.dimensions,
    rotation: full.rotation,
    created_at: full.created_at,
    updated_at: full.updated_at,
  };
}

export const floorSchema = z.object({
  id: z.number().int(),
  building_id: z.number().int(),
  project_id: z.number().int().describe('Deprecated: same as building_id'),
  name: z.string(),
  level: z.number().int(),
  level_height: z.number(),
  ...timestamps,
  maps: z.object({ scale: z.number().nullable(), map_url: z.string().nullable(), map_id: z.string().nullable().optional() }),
  custom_fields: customFields,
});

/** `map_id` is in floor responses but not inside the building detail (spec 2.2). */
export function presentFloor(floor: Floor, insideBuildingDetail = false): z.infer<typeof floorSchema> {
  const maps: { scale: number | null; map_url: string | null; map_id?: string | null } = {
    scale: floor.scale ?? null,
    map_url: imageUrl(floor.mapId),
  };
  if (!insideBuildingDetail) maps.map_id = floor.mapId ?? null;
  return {
    id: floor.id,
    building_id: floor.buildingId,
    project_id: floor.buildingId,
    name: floor.name,
    level: floor.level,
    level_height: floor.levelHeight,
    created_at: iso(floor.createdAt),
    updated_at: iso(floor.updatedAt),
    maps,
    custom_fields: floor.customFields,
  };
}

const positionSchema = z.object({
  floor_id: z.number().int(),
  radius: z.number(),
  georeferences: latLng,
  cartesians: z.object({ x: z.number(), y: z.number() }),
  lat: z.number(),
  lng: z.number(),
  x: z.number(),
  y: z.number(),
});

export const indoorPoiSchema = z.object({
  id: z.number().int(),
  building_id: z.number().int(),
  name: z.string(),
  category_id: z.number().int().nullable(),
  ...timestamps,
  info: z.string(),
  position: positionSchema.describe('Spec fields plus flat lat/lng/x/y, which the official client reads'),
  custom_fields: customFields,
});

export const outdoorPoiSchema = z.object({
  id: z.number().int(),
  building_id: z.number().int(),
  floor_id: z.null(),
  name: z.string(),
  category_id: z.number().int().nullable(),
  ...timestamps,
  info: z.string(),
  location: latLng,
  custom_fields: customFields,
});

const presentPosition = (floorId: number, radius: number, p: { x: number; y: number; lat: number; lng: number }) => ({
  floor_id: floorId,
  radius,
  georeferences: { lat: p.lat, lng: p.lng },
  cartesians: { x: p.x, y: p.y },
  lat: p.lat,
  lng: p.lng,
  x: p.x,
  y: p.y,
});

export function presentPoi(poi: Poi): z.infer<typeof indoorPoiSchema> | z.infer<typeof outdoorPoiSchema> {
  const common = {
    id: poi.id,
    building_id: poi.buildingId,
    name: poi.name,
    category_id: poi.categoryId ?? null,
    created_at: iso(poi.createdAt),
    updated_at: iso(poi.updatedAt),
    info: poi.info,
  };
  if (!poi.indoor) return { ...common, floor_id: null, location: { lat: poi.lat, lng: poi.lng }, custom_fields: poi.customFields };
  return {
    ...common,
    position: presentPosition(poi.floorId!, poi.radius, { x: poi.x!, y: poi.y!, lat: poi.lat, lng: poi.lng }),
    custom_fields: poi.customFields,
  };
}

export const poiCategorySchema = z.object({
  id: z.number().int(),
  name_en: z.string(),
  name_es: z.string(),
  code: z.string(),
  icon_url: z.string().describe('Relative url; empty when the category has no icon'),
  selected_icon_url: z.string(),
  ...timestamps,
  public: z.boolean(),
});

export function presentPoiCategory(category: PoiCategory): z.infer<typeof poiCategorySchema> {
  return {
    id: category.id,
    name_en: category.nameEn,
    name_es: category.nameEs,
    code: category.code,
    icon_url: imageUrl(category.iconId) ?? '',
    selected_icon_url: imageUrl(category.selectedIconId) ?? '',
    created_at: iso(category.createdAt),
    updated_at: iso(category.updatedAt),
    public: category.public,
  };
}

export const eventSchema = z.object({
  id: z.number().int(),
  building_id: z.number().int(),
  project_id: z.number().int().describe('Deprecated: same as building_id'),
  name: z.string(),
  ...timestamps,
  url: z.string().nullable(),
  info: z.string().describe('Sanitised HTML'),
  info_unsafe: z.string().describe('The HTML as sent'),
  position: positionSchema,
  conversion_area: positionSchema.nullable(),
  custom_fields: customFields,
});

const presentCircle = (circle: Circle) => presentPosition(circle.floorId, circle.radius, circle);

export function presentEvent(event: CartographyEvent): z.infer<typeof eventSchema> {
  return {
    id: event.id,
    building_id: event.buildingId,
    project_id: event.buildingId,
    name: event.name,
    created_at: iso(event.createdAt),
    updated_at: iso(event.updatedAt),
    url: event.url ?? null,
    info: event.info,
    info_unsafe: event.infoUnsafe,
    position: presentCircle({ floorId: event.floorId, x: event.x, y: event.y, lat: event.lat, lng: event.lng, radius: event.radius }),
    conversion_area: event.conversion ? presentCircle(event.conversion) : null,
    custom_fields: event.customFields,
  };
}

export const geofenceSchema = z.object({
  id: z.uuid(),
  ...timestamps,
  custom_fields: customFields,
  code: z.string(),
  name: z.string(),
  organization_id: z.uuid(),
  description: z.string().nullable(),
  info: z.string().nullable(),
  type: z.enum(['POINT', 'LINE', 'POLYGON', 'CIRCLE']),
  geometric: z.array(z.tuple([z.number(), z.number()])).describe('[lat, lng] pairs; a polygon ring repeats its first pair'),
  cartesians: z.array(z.tuple([z.number(), z.number()])).describe('The same points as [x, y] metres on the floor'),
  radius: z.number().nullable().describe('CIRCLE radius; capture distance of POINT and LINE (metres)'),
  level_id: z.number().int(),
  floor_id: z.number().int(),
  building_id: z.string(),
  max_stay_time: z.number().int().nullable(),
  min_dwell_s: z.number().int(),
  exit_grace_s: z.number().int(),
  muster_point: z.boolean().describe('An assembly point: reaching it marks a person safe during an evacuation'),
  deleted: z.boolean(),
});

export function presentGeofence(geofence: Geofence): z.infer<typeof geofenceSchema> {
  return {
    id: geofence.id,
    created_at: iso(geofence.createdAt),
    updated_at: iso(geofence.updatedAt),
    custom_fields: geofence.customFields,
    code: geofence.code,
    name: geofence.name,
    organization_id: (geofence.organization as { id: string }).id,
    description: geofence.description ?? null,
    info: geofence.info ?? null,
    type: geofence.type,
    geometric: geofence.geometric,
    cartesians: geofence.cartesians,
    radius: geofence.radius ?? null,
    level_id: geofence.floorId,
    floor_id: geofence.floorId,
    building_id: String(geofence.buildingId),
    max_stay_time: geofence.maxStayTime ?? null,
    min_dwell_s: geofence.minDwellS,
    exit_grace_s: geofence.exitGraceS,
    muster_point: geofence.musterPoint,
    deleted: geofence.deleted,
  };
}

export const pathsSchema = z.object({
  nodes: z.array(z.object({ id: z.number().int(), floor_id: z.number().int(), x: z.number(), y: z.number() })),
  links: z.array(
    z.object({
      source: z.number().int(),
      target: z.number().int(),
      origin: z.enum(['source', 'target', 'both']),
      accessible: z.boolean(),
      tags: z.array(z.string()),
    }),
  ),
});

export const presentPaths = (paths: BuildingPaths | null | undefined): z.infer<typeof pathsSchema> => ({
  nodes: paths?.nodes ?? [],
  links: paths?.links ?? [],
});

export const infrastructureSchema = z.object({
  id: z.number().int(),
  building_id: z.number().int(),
  floor_id: z.number().int(),
  type: z.enum(['wifi', 'ble']),
  name: z.string(),
  bssid: z.string().nullable(),
  ssid: z.string().nullable(),
  uuid: z.string().nullable(),
  major: z.number().int().nullable(),
  minor: z.number().int().nullable(),
  tx_power: z.number().nullable(),
  cartesians: z.object({ x: z.number(), y: z.number() }),
  georeferences: latLng,
  ...timestamps,
});

export function presentInfrastructure(item: InfrastructureItem): z.infer<typeof infrastructureSchema> {
  return {
    id: item.id,
    building_id: item.buildingId,
    floor_id: item.floorId,
    type: item.kind,
    name: item.name,
    bssid: item.bssid ?? null,
    ssid: item.ssid ?? null,
    uuid: item.uuid ?? null,
    major: item.major ?? null,
    minor: item.minor ?? null,
    tx_power: item.txPower ?? null,
    cartesians: { x: item.x, y: item.y },
    georeferences: { lat: item.lat, lng: item.lng },
    created_at: iso(item.createdAt),
    updated_at: iso(item.updatedAt),
  };
}
