import type { Bus, DeviceChange } from '../bus-channels.js';
import { StorageUnavailableError } from '../../shared/errors.js';
import type { CacheStats } from '../../shared/lru-cache.js';
import type { Logger } from '../../shared/logger.js';
import type { Storage } from '../../shared/storage/index.js';
import { pgArray } from '../../shared/storage/pg-array.js';
import { checkNewDevices, type DeviceQuota } from './device-quota.js';

export interface KnownDevice {
  id: string;
  identifier: string;
  userId: string | null;
}

export interface DeviceDirectoryOptions {
  /**
   * Age past which a device's owner is no longer trusted and is read again before use (a backstop should a bus
   * message be lost). Devices in use are re-read in the background every half of this, so they never reach it
   * while the database answers.
   */
  ttlMs?: number;
  /** Devices kept in memory over all organizations; beyond this the least recently used organizations' oldest go. */
  maxDevices?: number;
  now?: () => number;
  /** Where a failed background refresh is reported (the entries then expire and are read before use). */
  logger?: Logger;
  /** Devices an organization, and one upload, may register (device-quota.ts); none: unbounded. */
  quota?: DeviceQuota;
}

/** A device as cached: what the pipeline reads, plus when its row was read and whether it was used since. */
interface CachedDevice extends KnownDevice {
  readAt: number;
  used: boolean;
}

/** One organization's cached devices; replaced whole when its devices change, so a read in flight lands in the old one. */
interface OrganizationDevices {
  devices: Map<string, CachedDevice>;
  /** When the next background refresh of the devices in use is due. */
  refreshDue: number;
  refreshing: boolean;
}

const SELECT_DEVICES = 'select id, identifier, user_id from devices where organization_id = ? and identifier = any(?::text[])';

/**
 * Devices by the identifier the app sends, per organization. An unknown identifier is registered on its
 * first upload (one insert for the whole batch; concurrent gateways are reconciled by the unique key).
 *
 * Known devices are answered from memory without waiting (issue 15): the owners of the devices used since the
 * last refresh are re-read in the background, one query per organization every half TTL, so an upload never
 * waits for a read of a device it has seen unless the database stopped answering for a whole TTL. A change
 * announced on the bus drops the organization's devices at once (a reassignment takes effect on the next
 * upload); the background refresh bounds a lost announcement to half a TTL; the bus's resync signal (messages
 * may be lost) drops everything.
 */
export class DeviceDirectory {
  /** In order of last use: the first is the least recently used organization, evicted from first. */
  private readonly organizations = new Map<string, OrganizationDevices>();
  private cached = 0;
  private evictions = 0;
  private readonly ttlMs: number;
  private readonly refreshMs: number;
  private readonly maxDevices: number;
  private readonly now: () => number;

  constructor(
    private readonly storage: Storage,
    private readonly bus: Bus,
    private readonly options: DeviceDirectoryOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 60_000;
    this.refreshMs = this.ttlMs / 2;
    this.maxDevices = options.maxDevices ?? 100_000;
    if (!(this.maxDevices >= 1)) throw new Error('the device directory holds at least one device');
    this.now = options.now ?? Date.now;
  }

  async start(): Promise<void> {
    await this.bus.subscribe('devices:changed', (change) => {
      // The whole organization: a renamed identifier must not keep its old entry.
      this.drop(change.organizationId);
    });
    this.bus.onResync(() => {
      this.organizations.clear();
      this.cached = 0;
    });
  }

  stats(): CacheStats {
    return { size: this.cached, maxEntries: this.maxDevices, evictions: this.evictions };
  }

  async announce(change: DeviceChange): Promise<void> {
    await this.bus.publish('devices:changed', change);
  }

  /**
   * The device of each identifier, in the same order (repeats allowed); unknown ones are registered first.
   * Known ones cost a map lookup each, and no query. Every identifier gets its device or the call fails (503):
   * a device whose owner is not known must never pass for an unowned one (review NC1, point 3).
   */
  async resolve(organizationId: string, identifiers: readonly string[]): Promise<KnownDevice[]> {
    const organization = this.use(organizationId);
    const now = this.now();
    const devices: KnownDevice[] = new Array(identifiers.length);
    let missing: Set<string> | undefined;
    for (let index = 0; index < identifiers.length; index++) {
      const identifier = identifiers[index]!;
      const device = organization.devices.get(identifier);
      if (device && now - device.readAt < this.ttlMs) {
        device.used = true;
        devices[index] = device;
      } else (missing ??= new Set()).add(identifier);
    }
    if (now >= organization.refreshDue && !organization.refreshing) this.refreshInBackground(organizationId, organization, now);
    if (!missing) return devices;
    const read = await this.register(organizationId, organization, [...missing], now);
    for (let index = 0; index < identifiers.length; index++) devices[index] ??= read.get(identifiers[index]!)!;
    return devices;
  }

  /** The organization's devices, marked as just used (created empty, its first refresh a half TTL away). */
  private use(organizationId: string): OrganizationDevices {
    let organization = this.organizations.get(organizationId);
    if (organization) this.organizations.delete(organizationId);
    else organization = { devices: new Map(), refreshDue: this.now() + this.refreshMs, refreshing: false };
    this.organizations.set(organizationId, organization);
    return organization;
  }

  private drop(organizationId: string): void {
    const organization = this.organizations.get(organizationId);
    if (!organization) return;
    this.cached -= organization.devices.size;
    this.organizations.delete(organizationId);
  }

  /**
   * Inserts the identifiers not yet registered (another gateway may be doing the same: the unique key decides),
   * then reads them all. One not read back (deleted between the insert and the read, or a read that came back
   * short) fails the call as retryable: its owner is unknown, and "no owner" would let anyone upload for it.
   */
  private async register(
    organizationId: string,
    organization: OrganizationDevices,
    identifiers: string[],
    readAt: number,
  ): Promise<Map<string, KnownDevice>> {
    if (this.options.quota) await checkNewDevices(this.storage, this.options.quota, organizationId, identifiers);
    await this.storage.execute(
      `insert into devices (id, organization_id, identifier, name)
       select gen_random_uuid(), ?::uuid, identifier, identifier from unnest(?::text[]) as t(identifier)
       on conflict (organization_id, identifier) do nothing`,
      [organizationId, pgArray(identifiers)],
    );
    const rows = await this.storage.execute<{ id: string; identifier: string; user_id: string | null }>(SELECT_DEVICES, [
      organizationId,
      pgArray(identifiers),
    ]);
    const read = new Map<string, KnownDevice>();
    // Dropped (changed) or evicted while reading: the caller gets these rows, the cache does not keep them.
    const current = this.organizations.get(organizationId) === organization;
    for (const row of rows) {
      const device: CachedDevice = { id: row.id, identifier: row.identifier, userId: row.user_id, readAt, used: true };
      read.set(row.identifier, device);
      if (current) this.remember(organization, device);
    }
    const unread = identifiers.filter((identifier) => !read.has(identifier));
    if (unread.length > 0)
      throw new StorageUnavailableError(
        `${unread.length} device(s) could not be read back after registration (${unread
          .slice(0, 3)
          .map((identifier) => JSON.stringify(identifier))
          .join(', ')}); retry later`,
      );
    return read;
  }

  private remember(organization: OrganizationDevices, device: CachedDevice): void {
    const previous = organization.devices.get(device.identifier);
    if (previous) organization.devices.delete(device.identifier);
    else this.cached++;
    organization.devices.set(device.identifier, device);
    while (this.cached > this.maxDevices) this.evictOne();
  }

  /**
   * The least recently used organization's oldest device. An organization left empty stays (a read of its may
   * be in flight) until it comes first again with nothing to give.
   */
  private evictOne(): void {
    const [organizationId, organization] = this.organizations.entries().next().value as [string, OrganizationDevices];
    const oldest = organization.devices.keys().next().value;
    if (oldest === undefined) {
      this.organizations.delete(organizationId);
      return;
    }
    organization.devices.delete(oldest);
    this.cached--;
    this.evictions++;
  }

  /**
   * Re-reads the owners of the devices used since the last refresh, in one query, updating them in place; a
   * device not used since is left to age out (and forgotten here once it has), a deleted one is forgotten. Runs
   * apart from any upload: a failure is logged, and the entries then age out and are read before use.
   */
  private refreshInBackground(organizationId: string, organization: OrganizationDevices, startedAt: number): void {
    organization.refreshing = true;
    organization.refreshDue = startedAt + this.refreshMs;
    const inUse: CachedDevice[] = [];
    for (const device of organization.devices.values()) {
      if (device.used) {
        device.used = false;
        inUse.push(device);
      } else if (startedAt - device.readAt >= this.ttlMs) {
        organization.devices.delete(device.identifier);
        this.cached--;
      }
    }
    if (inUse.length === 0) {
      organization.refreshing = false;
      return;
    }
    const identifiers = inUse.map((device) => device.identifier);
    this.storage
      .execute<{ id: string; identifier: string; user_id: string | null }>(SELECT_DEVICES, [organizationId, pgArray(identifiers)])
      .then((rows) => {
        const byIdentifier = new Map(rows.map((row) => [row.identifier, row]));
        for (const device of inUse) {
          const row = byIdentifier.get(device.identifier);
          if (row && row.id === device.id) {
            device.userId = row.user_id;
            device.readAt = startedAt;
          } else if (organization.devices.get(device.identifier) === device) {
            // Deleted (or deleted and registered anew): read before its next use.
            organization.devices.delete(device.identifier);
            if (this.organizations.get(organizationId) === organization) this.cached--;
          }
        }
      })
      .catch((error: unknown) => this.options.logger?.warn({ err: error, organizationId }, 'device refresh failed'))
      .finally(() => (organization.refreshing = false));
  }
}
