import { ValidationError } from '../../shared/errors.js';
import type { Storage } from '../../shared/storage/index.js';
import { pgArray } from '../../shared/storage/pg-array.js';

export interface DeviceQuota {
  /** Devices one organization may have. */
  maxPerOrganization: number;
  /** Devices one upload may register. */
  maxNewPerUpload: number;
}

/**
 * Refuses (422) an upload that would register more than `maxNewPerUpload` devices, or take its organization
 * past `maxPerOrganization`: one upload cannot create 10,000 device rows (and as many detector states). Reads
 * only when identifiers are about to be registered; returns how many of them are new.
 */
export async function checkNewDevices(
  storage: Storage,
  quota: DeviceQuota,
  organizationId: string,
  identifiers: readonly string[],
): Promise<number> {
  const [row] = await storage.execute<{ known: string | number; total: string | number }>(
    `select (select count(*) from devices where organization_id = ? and identifier = any(?::text[])) as known,
            (select count(*) from devices where organization_id = ?) as total`,
    [organizationId, pgArray(identifiers), organizationId],
  );
  const fresh = identifiers.length - Number(row!.known);
  if (fresh > quota.maxNewPerUpload) {
    throw new ValidationError(
      [
        {
          field: 'poses',
          message: `one upload may register at most ${quota.maxNewPerUpload} new devices (DEVICES_MAX_NEW_PER_UPLOAD); this one names ${fresh}`,
        },
      ],
      'Too many new devices',
    );
  }
  if (fresh > 0 && Number(row!.total) + fresh > quota.maxPerOrganization) {
    throw new ValidationError(
      [
        {
          field: 'poses',
          message: `an organization may have at most ${quota.maxPerOrganization} devices (DEVICES_MAX_PER_ORGANIZATION); ${Number(row!.total)} exist`,
        },
      ],
      'Too many devices',
    );
  }
  return fresh;
}
