import type { Bus } from '../../shared/bus/index.js';
import { LruCache, type CacheStats } from '../../shared/lru-cache.js';
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

export interface DeviceDirectoryOptions {
  /** Age past which a device's owner is read again (a backstop should a bus message be lost). */
  ttlMs?: number;
  /** Devices kept in memory over all organizations; the least recently used beyond this are read again on use. */
  maxDevices?: number;
  now?: () => number;
}

/**
 * Devices by the identifier the app sends, per organization. An unknown identifier is registered on its
 * first upload (one insert for the whole batch; concurrent gateways are reconciled by the unique key).
 *
 * One bounded cache for every organization, keyed by organization, its generation and identifier: a change
 * to an organization's devices bumps its generation, so its old entries are never read again and age out,
 * instead of being searched for. The bus's resync signal (messages may be lost) drops everything.
 */
export class DeviceDirectory {
  private readonly known: LruCache<string, KnownDevice>;
  /** Organization -> how many times its devices changed here; only organizations that ever changed. */
  private readonly generations = new Map<string, number>();

  constructor(
    private readonly storage: Storage,
    private readonly bus: Bus,
    options: DeviceDirectoryOptions = {},
  ) {
    this.known = new LruCache({ maxEntries: options.maxDevices ?? 100_000, ttlMs: options.ttlMs ?? 60_000, now: options.now });
  }

  async start(): Promise<void> {
    await this.bus.subscribe(DEVICES_CHANNEL, (payload) => {
      // The whole organization: a renamed identifier must not keep its old entry.
      const { organizationId } = payload as DeviceChange;
      this.generations.set(organizationId, (this.generations.get(organizationId) ?? 0) + 1);
    });
    this.bus.onResync(() => this.known.clear());
  }

  stats(): CacheStats {
    return this.known.stats();
  }

  async announce(change: DeviceChange): Promise<void> {
    await this.bus.publish(DEVICES_CHANNEL, change);
  }

  private keyer(organizationId: string): (identifier: string) => string {
    const prefix = `${organizationId}\u0000${this.generations.get(organizationId) ?? 0}\u0000`;
    return (identifier) => prefix + identifier;
  }

  /** Every identifier resolved (the map holds exactly these), unknown ones registered. */
  async resolve(organizationId: string, identifiers: Iterable<string>): Promise<Map<string, KnownDevice>> {
    // Keys made before the queries: rows read before a change must land under the generation they belong to.
    const key = this.keyer(organizationId);
    const devices = new Map<string, KnownDevice>();
    const missing: string[] = [];
    for (const identifier of new Set(identifiers)) {
      const device = this.known.get(key(identifier));
      if (device) devices.set(identifier, device);
      else missing.push(identifier);
    }
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
      for (const row of rows) {
        const device = { id: row.id, identifier: row.identifier, userId: row.user_id };
        devices.set(row.identifier, device);
        this.known.set(key(row.identifier), device);
      }
    }
    return devices;
  }
}
