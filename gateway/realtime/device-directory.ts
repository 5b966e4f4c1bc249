import type { Bus } from '../../shared/bus/index.js';
import type { Storage } from '../../shared/storage/index.js';
import { pgArray } from '../../shared/storage/pg-array.js';

export interface KnownDevice {
  id: string;
  identifier: string;
  userId: string | null;
}

export const DEVICES_CHANNEL = 'devices:changed';
export interface DeviceChange {
  organizationId: string;
  identifier: string;
}

/**
 * Devices by the identifier the app sends, per organization. An unknown identifier is registered on its
 * first upload (one insert for the whole batch; concurrent gateways are reconciled by the unique key).
 */
export class DeviceDirectory {
  private readonly known = new Map<string, Map<string, KnownDevice>>();

  constructor(
    private readonly storage: Storage,
    private readonly bus: Bus,
  ) {}

  async start(): Promise<void> {
    await this.bus.subscribe(DEVICES_CHANNEL, (payload) => {
      // The whole organization: a renamed identifier must not keep its old entry.
      this.known.delete((payload as DeviceChange).organizationId);
    });
  }

  async announce(change: DeviceChange): Promise<void> {
    await this.bus.publish(DEVICES_CHANNEL, change);
  }

  /** Every identifier resolved, unknown ones registered. */
  async resolve(organizationId: string, identifiers: Iterable<string>): Promise<Map<string, KnownDevice>> {
    let devices = this.known.get(organizationId);
    if (!devices) this.known.set(organizationId, (devices = new Map()));
    const missing = [...new Set(identifiers)].filter((identifier) => !devices.has(identifier));
    if (missing.length > 0) {
      await this.storage.execute(
        `insert into devices (id, organization_id, identifier, name)
         select gen_random_uuid(), ?::uuid, identifier, identifier from unnest(?::text[]) as t(identifier)
         on conflict (organization_id, identifier) do nothing`,
        [organizationId, pgArray(missing)],
      );
      const rows = await this.storage.execute<{ id: string; identifier: string; user_id: string | null }>(
        'select id, identifier, user_id from devices where organization_id = ? and identifier = any(?::text[])',
        [organizationId, pgArray(missing)],
      );
      for (const row of rows) devices.set(row.identifier, { id: row.id, identifier: row.identifier, userId: row.user_id });
      if (devices.size > 200_000) this.known.delete(organizationId); // bounded: reload rather than grow forever
    }
    return devices;
  }
}

