import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { DeviceSchema, OrganizationSchema, UserSchema, type Device } from '../../shared/storage/entities/index.js';
import { booleanParam, listParam, uuidParam } from '../http/query-schemas.js';
import { referenced, resourceRoutes } from '../http/resource.js';
import type { GatewayServices } from '../services.js';

const deviceFields = {
  identifier: z.string().trim().min(1).max(200).describe('What the app sends as device_id; unique in the organization'),
  name: z.string().max(200),
  user_id: z.uuid().nullable().describe('The user the device is assigned to'),
};

const deviceResponse = z.object({
  id: z.uuid(),
  identifier: z.string(),
  name: z.string(),
  user_id: z.uuid().nullable(),
  organization_id: z.uuid(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});

const presentDevice = (device: Device): z.infer<typeof deviceResponse> => ({
  id: device.id,
  identifier: device.identifier,
  name: device.name,
  user_id: device.user ? (device.user as { id: string }).id : null,
  organization_id: (device.organization as { id: string }).id,
  created_at: device.createdAt.toISOString(),
  updated_at: device.updatedAt.toISOString(),
});

/** Tracked devices. Apps also register a device implicitly by uploading positions with a new device_id. */
export function deviceRoutes(services: GatewayServices) {
  return resourceRoutes(services.storage, {
    noun: 'device',
    path: '/api/v1/devices',
    tag: 'devices',
    entity: DeviceSchema,
    idParam: uuidParam,
    actions: { read: 'devices:read', write: 'devices:write' },
    response: deviceResponse,
    createBody: z.object({
      identifier: deviceFields.identifier,
      name: deviceFields.name.default(''),
      user_id: deviceFields.user_id.optional(),
    }),
    updateBody: z.object(deviceFields).partial(),
    present: presentDevice,
    readableWithoutAction: (principal, device) => (device.user as { id: string } | null | undefined)?.id === principal.userId,
    create: async (context, body) =>
      context.em.create(DeviceSchema, {
        id: randomUUID(),
        organization: context.em.getReference(OrganizationSchema, context.principal.organizationId),
        identifier: body.identifier,
        name: body.name,
        user: (await referenced(context, UserSchema, body.user_id, 'user_id', 'user')) ?? null,
        createdAt: new Date(),
        updatedAt: new Date(),
      }),
    update: async (context, device, body) => {
      const user = await referenced(context, UserSchema, body.user_id, 'user_id', 'user');
      if (body.identifier !== undefined) device.identifier = body.identifier;
      if (body.name !== undefined) device.name = body.name;
      if (user !== undefined) device.user = user;
    },
    // The hot path caches devices by identifier (owner included): tell every gateway.
    onChange: ({ principal }, device) =>
      services.devices.announce({ organizationId: principal.organizationId, identifier: device.identifier }),
    list: {
      paginated: true,
      query: z.object({
        identifiers: listParam(z.string()).optional(),
        user_ids: listParam(z.uuid()).optional(),
        only_assigned: booleanParam.optional().describe('Only devices assigned to a user'),
      }),
      filter: (query) => ({
        ...(query.identifiers ? { identifier: { $in: query.identifiers } } : {}),
        ...(query.user_ids ? { user: { $in: query.user_ids } } : query.only_assigned ? { user: { $ne: null } } : {}),
      }),
      sortFields: { identifier: 'identifier', name: 'name', created_at: 'createdAt', id: 'id' },
      defaultSort: 'identifier',
    },
  });
}
