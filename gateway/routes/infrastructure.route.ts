import { z } from 'zod';
import { ValidationError } from '../../shared/errors.js';
import { InfrastructureSchema, OrganizationSchema, type InfrastructureItem } from '../../shared/storage/entities/index.js';
import { place, positionInput } from '../cartography/placement.js';
import { infrastructureSchema, presentInfrastructure } from '../cartography/presenters.js';
import { idParam } from '../http/query-schemas.js';
import { resourceRoutes, type ResourceContext } from '../http/resource.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';

const bssid = z
  .string()
  .regex(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i, 'a BSSID like 00:11:22:aa:bb:cc')
  .transform((value) => value.toLowerCase());
const beaconUuid = z.uuid().transform((value) => value.toUpperCase());
const uint16 = z.number().int().min(0).max(65535);

const itemFields = {
  building_id: z.coerce.number().int().positive(),
  type: z.enum(['wifi', 'ble']),
  name: z.string().max(200),
  bssid,
  ssid: z.string().max(32).nullable(),
  uuid: beaconUuid,
  major: uint16,
  minor: uint16,
  tx_power: z.number().min(-120).max(30).nullable().describe('dBm (at 1 m for beacons)'),
  position: positionInput,
};

/** Wi-Fi access points (BSSID) and BLE beacons (UUID-major-minor) placed on a building's floors. */
export function infrastructureRoutes(services: GatewayServices) {
  const { cartography, storage } = services;

  async function apply(
    { em, principal }: ResourceContext,
    item: Partial<InfrastructureItem>,
    body: Partial<z.infer<z.ZodObject<typeof itemFields>>>,
  ) {
    if (body.building_id !== undefined && item.buildingId !== undefined && body.building_id !== item.buildingId) {
      throw new ValidationError([{ field: 'building_id', message: 'cannot move to another building' }]);
    }
    const building = await cartography.building(em, principal, body.building_id ?? item.buildingId!, 'building_id');
    item.buildingId = building.id;
    const kind = body.type ?? item.kind!;
    if (body.type !== undefined && item.kind !== undefined && body.type !== item.kind)
      throw new ValidationError([{ field: 'type', message: 'cannot change type' }]);
    item.kind = kind;
    if (kind === 'wifi') {
      if (body.bssid !== undefined) item.bssid = body.bssid;
      if (body.ssid !== undefined) item.ssid = body.ssid;
      if (!item.bssid) throw new ValidationError([{ field: 'bssid', message: 'required for a wifi access point' }]);
    } else {
      if (body.uuid !== undefined) item.uuid = body.uuid;
      if (body.major !== undefined) item.major = body.major;
      if (body.minor !== undefined) item.minor = body.minor;
      for (const field of ['uuid', 'major', 'minor'] as const) {
        if (item[field] === undefined || item[field] === null) throw new ValidationError([{ field, message: 'required for a BLE beacon' }]);
      }
    }
    if (body.position) {
      await cartography.floorOf(em, building, body.position.floor_id, 'position.floor_id');
      Object.assign(item, { floorId: body.position.floor_id, ...place(cartography.transformOf(building), body.position, 'position') });
    }
    if (body.name !== undefined) item.name = body.name;
    if (body.tx_power !== undefined) item.txPower = body.tx_power;
  }

  const resource = resourceRoutes(storage, {
    noun: 'infrastructure item',
    path: '/api/v1/infrastructure',
    tag: 'cartography',
    entity: InfrastructureSchema,
    idParam,
    actions: { read: 'cartography:read', write: 'cartography:write' },
    response: infrastructureSchema,
    createBody: z.object(itemFields).partial().required({ building_id: true, type: true, position: true }),
    updateBody: z.object(itemFields).partial(),
    present: presentInfrastructure,
    create: async (context, body) => {
      const item: Partial<InfrastructureItem> = {
        organization: context.em.getReference(OrganizationSchema, context.principal.organizationId),
        name: '',
        createdAt: new Date(),
        updatedAt: new Date(),
      };
      await apply(context, item, body);
      return context.em.create(InfrastructureSchema, item, { partial: true });
    },
    update: (context, item, body) => apply(context, item, body),
    onChange: ({ principal }, item, change) =>
      cartography.announce({
        organizationId: principal.organizationId,
        buildingId: item.buildingId,
        kind: 'infrastructure',
        id: item.id,
        change,
      }),
  });

  const list = defineRoute({
    method: 'GET',
    path: '/api/v1/infrastructure',
    summary: 'Wi-Fi access points and BLE beacons of a building',
    tags: ['cartography'],
    auth: 'authenticated',
    action: 'cartography:read',
    query: z.object({ building_id: idParam }),
    response: z.object({ building_id: z.number().int(), wifi: z.array(infrastructureSchema), ble: z.array(infrastructureSchema) }),
    handler: async ({ principal, query }) => {
      const em = storage.em();
      const building = await cartography.building(em, principal, query.building_id);
      const items = (await em.find(InfrastructureSchema, { buildingId: building.id }, { orderBy: { id: 'asc' } })).map(
        presentInfrastructure,
      );
      return {
        body: { building_id: building.id, wifi: items.filter((i) => i.type === 'wifi'), ble: items.filter((i) => i.type === 'ble') },
      };
    },
  });
  return [list, ...resource];
}
