import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ForbiddenError, NotFoundError } from '../../shared/errors.js';
import { hashPassword } from '../../shared/passwords.js';
import { OrganizationSchema, UserSchema, type Organization } from '../../shared/storage/entities/index.js';
import { defineRoute } from '../http/route.js';
import { flushOrExplain } from '../http/resource.js';
import type { GatewayServices } from '../services.js';
import { presentUser, userResponse } from './users.route.js';

const organizationResponse = z.object({ id: z.uuid(), name: z.string(), created_at: z.iso.datetime(), updated_at: z.iso.datetime() });

const presentOrganization = (organization: Organization) => ({
  id: organization.id,
  name: organization.name,
  created_at: organization.createdAt.toISOString(),
  updated_at: organization.updatedAt.toISOString(),
});

const alarmSettingsResponse = z.object({ deadman_auto_close: z.boolean().describe('An OPEN DEADMAN is closed by the system when its device reports again (false: a person confirms)') });

export function organizationRoutes(services: GatewayServices) {
  return [
    ...(['GET', 'PUT'] as const).map((method) =>
      defineRoute({
        method,
        path: '/api/v1/organizations/current_organization/alarm_settings',
        summary: method === 'GET' ? "Alarm settings of the caller's organization" : "Set the alarm settings of the caller's organization (only the fields sent)",
        tags: ['organizations'],
        auth: 'authenticated',
        action: method === 'GET' ? 'alarms:read' : 'cartography:write',
        body: method === 'PUT' ? alarmSettingsResponse.partial().strict() : undefined,
        response: alarmSettingsResponse,
        handler: async ({ principal, body, audit }) => {
          const present = (organization: Organization) => ({ deadman_auto_close: organization.deadmanAutoClose ?? false });
          const find = async (em: ReturnType<typeof services.storage.em>) => {
            const organization = await em.findOne(OrganizationSchema, { id: principal.organizationId });
            if (!organization) throw new NotFoundError('Organization');
            return organization;
          };
          if (method === 'GET') return { body: present(await find(services.storage.em())) };
          const after = await services.storage.em().transactional(async (em) => {
            const organization = await find(em);
            const before = present(organization);
            const settings = body as Partial<z.infer<typeof alarmSettingsResponse>>;
            if (settings.deadman_auto_close !== undefined) organization.deadmanAutoClose = settings.deadman_auto_close;
            await em.flush();
            await audit.record(em, { objectType: 'organization_alarm_settings', objectId: organization.id, before, after: present(organization) });
            return present(organization);
          });
          return { body: after };
        },
      }),
    ),
    defineRoute({
      method: 'GET',
      path: '/api/v1/organizations/current_organization',
      summary: "The caller's organization",
      tags: ['organizations'],
      auth: 'authenticated',
      action: 'organization:read',
      response: organizationResponse,
      handler: async ({ principal }) => {
        const organization = await services.storage.em().findOne(OrganizationSchema, { id: principal.organizationId });
        if (!organization) throw new NotFoundError('Organization');
        return { body: presentOrganization(organization) };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/organizations',
      summary: 'Create an organization and its first administrator (platform administrator only)',
      tags: ['organizations'],
      auth: 'authenticated',
      body: z.object({
        name: z.string().trim().min(1).max(200),
        admin: z.object({ email: z.email(), password: z.string().min(8).max(200), full_name: z.string().max(200).default('') }),
      }),
      response: organizationResponse.extend({ admin: userResponse }),
      successStatus: 201,
      handler: async ({ principal, body, audit }) => {
        if (!principal.platformAdmin) throw new ForbiddenError('Only the platform administrator creates organizations');
        const passwordHash = await hashPassword(body.admin.password);
        const presented = await services.storage.em().transactional(async (em) => {
          const now = new Date();
          const organization = em.create(OrganizationSchema, { id: randomUUID(), name: body.name, createdAt: now, updatedAt: now });
          const admin = em.create(UserSchema, {
            id: randomUUID(),
            organization,
            email: body.admin.email.toLowerCase(),
            passwordHash,
            fullName: body.admin.full_name,
            role: 'admin',
            platformAdmin: false,
            buildingIds: [],
            createdAt: now,
            updatedAt: now,
          });
          await flushOrExplain(em, 'user');
          const presented = { ...presentOrganization(organization), admin: presentUser(admin) };
          // Logged in the creator's organization (who did it); `sent` lists the admin's password, redacted.
          await audit.record(em, { objectType: 'organizations', objectId: organization.id, before: null, after: presented, sent: body });
          return presented;
        });
        return { status: 201, body: presented };
      },
    }),
  ];
}
