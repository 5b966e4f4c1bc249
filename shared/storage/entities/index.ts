import { OrganizationSchema } from './organization.entity.js';
import { UserSchema } from './user.entity.js';

export * from './organization.entity.js';
export * from './user.entity.js';

/** Every entity the ORM knows; the schema itself is owned by the migrations, never by diffing. */
export const allEntities = [OrganizationSchema, UserSchema];
