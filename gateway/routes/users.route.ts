import { randomUUID } from 'node:crypto';
import { raw } from '@mikro-orm/core';
import { z } from 'zod';
import { ForbiddenError, ConflictError } from '../../shared/errors.js';
import { hashPassword } from '../../shared/passwords.js';
import { GroupSchema, OrganizationSchema, ROLES, UserSchema, type Role, type User } from '../../shared/storage/entities/index.js';
import { assignableRoles, mayChangeUser, mayTakeOverUser } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import { booleanParam, listParam, uuidParam } from '../http/query-schemas.js';
import { referenced, resourceRoutes, type ResourceContext } from '../http/resource.js';
import { eraseDeletedUser, erasureJob, type ErasureRequest } from '../../shared/privacy/erasure.js';
import type { GatewayServices } from '../services.js';

/**
 * Roles are `admin`, `user_manager` and `user`. The official client's role names are accepted as aliases
 * on input (ADMIN_ORG -> admin; ZONE_MANAGER, COLLECTIVE_MANAGER -> user_manager; STAFF, USER -> user).
 */
const ROLE_ALIASES: Record<string, Role> = {
  admin: 'admin',
  admin_org: 'admin',
  user_manager: 'user_manager',
  zone_manager: 'user_manager',
  collective_manager: 'user_manager',
  user: 'user',
  staff: 'user',
};
export const roleInput = z
  .string()
  .transform((value, context) => {
    const role = ROLE_ALIASES[value.toLowerCase()];
    if (!role) context.addIssue({ code: 'custom', message: `one of ${ROLES.join(', ')}` });
    return role as Role;
  })
  .describe(`Case-insensitive: ${Object.keys(ROLE_ALIASES).join(', ')} (aliases of ${ROLES.join(', ')})`);

/** A user is in at most one group: `groups` (id or one-element list) or the client's `group_ids`. */
const groupInput = z.union([z.uuid(), z.array(z.uuid()).max(1, 'a user belongs to at most one group'), z.null()]);

const userFields = {
  email: z.email().max(320),
  password: z.string().min(8, 'at least 8 characters').max(200),
  full_name: z.string().max(200),
  role: roleInput,
  code: z.string().max(100).nullable(),
  locale: z.string().max(20).nullable(),
  info: z.string().max(10_000).nullable(),
  groups: groupInput,
  group_ids: groupInput,
  building_ids: z.array(z.number().int().positive()).max(10_000),
};

const createUserBody = z
  .object({
    ...userFields,
    full_name: userFields.full_name.default(''),
    role: userFields.role.default('user'),
  })
  .partial({ code: true, locale: true, info: true, groups: true, group_ids: true, building_ids: true });
const updateUserBody = z.object(userFields).partial();

export const userResponse = z.object({
  id: z.uuid(),
  email: z.string(),
  full_name: z.string(),
  role: z.enum(ROLES),
  code: z.string().nullable(),
  locale: z.string().nullable(),
  info: z.string().nullable(),
  organization_id: z.uuid(),
  groups: z.array(z.uuid()).describe('The user’s group, as a list of at most one id'),
  group_ids: z.array(z.uuid()).describe('Same as groups (the official client reads this name)'),
  building_ids: z.array(z.number().int()),
  platform_admin: z.boolean(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});

export function presentUser(user: User): z.infer<typeof userResponse> {
  const groupId = user.group ? (user.group as { id: string }).id : undefined;
  return {
    id: user.id,
    email: user.email,
    full_name: user.fullName,
    role: user.role,
    code: user.code ?? null,
    locale: user.locale ?? null,
    info: user.info ?? null,
    organization_id: (user.organization as { id: string }).id,
    groups: groupId ? [groupId] : [],
    group_ids: groupId ? [groupId] : [],
    building_ids: user.buildingIds ?? [],
    platform_admin: user.platformAdmin,
    created_at: user.createdAt.toISOString(),
    updated_at: user.updatedAt.toISOString(),
  };
}

function requireAssignable(principal: Principal, role: Role, field = 'role'): void {
  if (!assignableRoles(principal.role).includes(role)) {
    throw new ForbiddenError(`A ${principal.role} may not give or manage the role ${role}${field === 'role' ? '' : ` (${field})`}`);
  }
}

/** The user's group: `groups` (an id or a one-element list) or, as the official client sends it, `group_ids`. */
function resolveGroup(context: ResourceContext, body: { groups?: unknown; group_ids?: unknown }) {
  const field = body.groups !== undefined ? 'groups' : 'group_ids';
  const value = body.groups !== undefined ? body.groups : body.group_ids;
  const id = Array.isArray(value) ? (value[0] ?? null) : value;
  return referenced(context, GroupSchema, id as string | null | undefined, field, 'group');
}

/** The erasure each deletion recorded, and the devices it deleted: queued and announced once the delete is committed. */
const deletions = new WeakMap<User, { erasure: ErasureRequest; devices: string[] }>();

/** Users whose role an update is changing, so that its announcement also closes their sockets (opened under the old role). */
const roleChanged = new WeakSet<User>();

/** Users of the caller's organization (paginated, with the filters the official client sends). */
export function userRoutes(services: GatewayServices) {
  return resourceRoutes(services.storage, {
    noun: 'user',
    path: '/api/v1/users',
    tag: 'users',
    entity: UserSchema,
    idParam: uuidParam,
    actions: { read: 'users:read', write: 'users:write' },
    response: userResponse,
    createBody: createUserBody,
    updateBody: updateUserBody,
    populate: ['group'],
    present: presentUser,
    readableWithoutAction: (principal, user) => principal.userId === user.id,
    create: async (context, body) => {
      requireAssignable(context.principal, body.role);
      const group = await resolveGroup(context, body);
      return context.em.create(UserSchema, {
        id: randomUUID(),
        organization: context.em.getReference(OrganizationSchema, context.principal.organizationId),
        email: body.email.toLowerCase(),
        passwordHash: await hashPassword(body.password),
        fullName: body.full_name,
        role: body.role,
        platformAdmin: false,
        group: group ?? null,
        code: body.code ?? null,
        locale: body.locale ?? null,
        info: body.info ?? null,
        buildingIds: body.building_ids ?? [],
        createdAt: new Date(),
        updatedAt: new Date(),
      });
    },
    update: async (context, user, body) => {
      if (!mayChangeUser(context.principal, user))
        throw new ForbiddenError('Only the platform administrator changes the platform administrator');
      requireAssignable(context.principal, user.role, 'the user’s current role');
      if (body.role !== undefined && body.role !== user.role) {
        requireAssignable(context.principal, body.role);
        if (user.id === context.principal.userId) throw new ConflictError('You cannot change your own role');
      }
      if ((body.password !== undefined || body.email !== undefined) && !mayTakeOverUser(context.principal, user)) {
        throw new ForbiddenError('A user_manager may not change the password or e-mail of another user_manager');
      }
      const group = await resolveGroup(context, body);
      if (body.email !== undefined) user.email = body.email.toLowerCase();
      // A new password signs the user out everywhere: tokens of the old credential version are refused.
      if (body.password !== undefined) user.credentialVersion = (user.credentialVersion ?? 0) + 1;
      // A new role applies to existing tokens at once (the role is read per request), but not to open sockets.
      if (body.role !== undefined && body.role !== user.role) roleChanged.add(user);
      if (body.password !== undefined) user.passwordHash = await hashPassword(body.password);
      if (body.full_name !== undefined) user.fullName = body.full_name;
      if (body.role !== undefined) user.role = body.role;
      if (body.code !== undefined) user.code = body.code;
      if (body.locale !== undefined) user.locale = body.locale;
      if (body.info !== undefined) user.info = body.info;
      if (body.building_ids !== undefined) user.buildingIds = body.building_ids;
      if (group !== undefined) user.group = group;
    },
    beforeDelete: (context, user) => {
      if (!mayChangeUser(context.principal, user))
        throw new ForbiddenError('Only the platform administrator changes the platform administrator');
      requireAssignable(context.principal, user.role, 'the user’s current role');
      if (user.id === context.principal.userId) throw new ConflictError('You cannot delete yourself');
      if (!mayTakeOverUser(context.principal, user)) throw new ForbiddenError('A user_manager may not delete another user_manager');
      if (user.platformAdmin) throw new ConflictError('The platform administrator cannot be deleted');
    },
    // Deleting a person erases them (docs/privacy.md): their devices now, their history by the erasure job.
    remove: async (context, user) => {
      const { organizationId, userId } = context.principal;
      deletions.set(user, await eraseDeletedUser(context.em, organizationId, user.id, userId));
      context.em.remove(user);
    },
    // Sockets of an older credential version are closed; all of them when the user is deleted or changes role.
    onChange: async ({ principal }, user, change) => {
      await services.authenticator.invalidate({
        userId: user.id,
        revoke: change !== 'created',
        credentialVersion: change === 'deleted' || roleChanged.delete(user) ? undefined : (user.credentialVersion ?? 0),
      });
      const deleted = deletions.get(user);
      if (!deleted) return;
      deletions.delete(user);
      await services.jobs.schedule(erasureJob(deleted.erasure));
      for (const identifier of deleted.devices) await services.devices.announce({ organizationId: principal.organizationId, identifier });
    },
    list: {
      paginated: true,
      query: z.object({
        ids: listParam(z.uuid()).optional(),
        exclude_ids: listParam(z.uuid()).optional(),
        group_ids: listParam(z.uuid()).optional(),
        building_ids: listParam(z.coerce.number().int()).optional(),
        has_buildings: booleanParam.optional(),
        full_name: z.string().max(200).optional().describe('Case-insensitive substring of the full name'),
        codes: listParam(z.string()).optional(),
        role: roleInput.optional(),
      }),
      filter: (query) => {
        const id: Record<string, unknown> = {};
        if (query.ids) id.$in = query.ids;
        if (query.exclude_ids) id.$nin = query.exclude_ids;
        const where: Record<string, unknown> = {};
        if (Object.keys(id).length > 0) where.id = id;
        if (query.group_ids) where.group = { $in: query.group_ids };
        if (query.building_ids) where.buildingIds = { $overlap: query.building_ids };
        if (query.has_buildings !== undefined) where[raw('cardinality(building_ids)')] = query.has_buildings ? { $gt: 0 } : 0;
        if (query.full_name) where.fullName = { $ilike: `%${query.full_name.replace(/[\\%_]/g, (c: string) => `\\${c}`)}%` };
        if (query.codes) where.code = { $in: query.codes };
        if (query.role) where.role = query.role;
        return where;
      },
      sortFields: {
        email: 'email',
        full_name: 'fullName',
        role: 'role',
        code: 'code',
        created_at: 'createdAt',
        updated_at: 'updatedAt',
        id: 'id',
      },
      defaultSort: 'email',
    },
  });
}
