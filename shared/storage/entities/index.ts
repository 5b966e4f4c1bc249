import { ApiKeySchema } from './api-key.entity.js';
import { BuildingPathsSchema } from './building-paths.entity.js';
import { BuildingSchema } from './building.entity.js';
import { EventSchema } from './event.entity.js';
import { FloorSchema } from './floor.entity.js';
import { GeofenceSchema } from './geofence.entity.js';
import { InfrastructureSchema } from './infrastructure.entity.js';
import { PoiCategorySchema } from './poi-category.entity.js';
import { PoiSchema } from './poi.entity.js';
import { DeviceSchema } from './device.entity.js';
import { GroupSchema } from './group.entity.js';
import { ImageSchema } from './image.entity.js';
import { OrganizationSchema } from './organization.entity.js';
import { RefreshTokenSchema } from './refresh-token.entity.js';
import { UserSchema } from './user.entity.js';

export * from './api-key.entity.js';
export * from './building-paths.entity.js';
export * from './building.entity.js';
export * from './common-properties.js';
export * from './event.entity.js';
export * from './floor.entity.js';
export * from './geofence.entity.js';
export * from './infrastructure.entity.js';
export * from './poi-category.entity.js';
export * from './poi.entity.js';
export * from './device.entity.js';
export * from './group.entity.js';
export * from './image.entity.js';
export * from './organization.entity.js';
export * from './refresh-token.entity.js';
export * from './user.entity.js';

/** Every entity the ORM knows; the schema itself is owned by the migrations, never by diffing. */
export const allEntities = [
  OrganizationSchema,
  UserSchema,
  GroupSchema,
  DeviceSchema,
  ApiKeySchema,
  RefreshTokenSchema,
  BuildingSchema,
  FloorSchema,
  PoiCategorySchema,
  PoiSchema,
  EventSchema,
  GeofenceSchema,
  BuildingPathsSchema,
  InfrastructureSchema,
  ImageSchema,
];
