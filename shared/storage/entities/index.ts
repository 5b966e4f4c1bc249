import { ApiKeySchema } from './api-key.entity.js';
import { DeviceSchema } from './device.entity.js';
import { GroupSchema } from './group.entity.js';
import { OrganizationSchema } from './organization.entity.js';
import { RefreshTokenSchema } from './refresh-token.entity.js';
import { UserSchema } from './user.entity.js';

export * from './api-key.entity.js';
export * from './device.entity.js';
export * from './group.entity.js';
export * from './organization.entity.js';
export * from './refresh-token.entity.js';
export * from './user.entity.js';

/** Every entity the ORM knows; the schema itself is owned by the migrations, never by diffing. */
export const allEntities = [OrganizationSchema, UserSchema, GroupSchema, DeviceSchema, ApiKeySchema, RefreshTokenSchema];
