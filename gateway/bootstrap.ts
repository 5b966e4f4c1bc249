import { randomUUID } from 'node:crypto';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';
import { generatePassword, hashPassword } from '../shared/passwords.js';
import type { Storage } from '../shared/storage/index.js';
import { OrganizationSchema, UserSchema } from '../shared/storage/entities/index.js';

export interface BootstrapResult {
  created: boolean;
  email?: string;
  /** Only when the password was generated: shown once, never stored in clear. */
  generatedPassword?: string;
}

/**
 * On the very first start (no user at all) creates the first organization and its administrator, who is
 * also the platform administrator. Several gateways booting at once on one database are serialised by an
 * advisory lock, so exactly one of them creates it.
 */
export async function bootstrapFirstAdmin(storage: Storage, config: Config, logger: Logger): Promise<BootstrapResult> {
  const em = storage.em();
  return em.transactional(async (tx) => {
    await tx.execute(`select pg_advisory_xact_lock(hashtext('floorcast:bootstrap'))`);
    if ((await tx.count(UserSchema, {})) > 0) return { created: false };
    const password = config.ADMIN_PASSWORD ?? generatePassword();
    const organization = tx.create(OrganizationSchema, {
      id: randomUUID(),
      name: config.ADMIN_ORGANIZATION,
      createdAt: new Date(),
      updatedAt: new Date(),
    });
    tx.create(UserSchema, {
      id: randomUUID(),
      organization,
      email: config.ADMIN_EMAIL.toLowerCase(),
      passwordHash: await hashPassword(password),
      fullName: 'Administrator',
      role: 'admin',
      platformAdmin: true,
      buildingIds: [],
      createdAt: new Date(),
      updatedAt: new Date(),
    });
    await tx.flush();
    logger.info({ email: config.ADMIN_EMAIL, organization: organization.id }, 'created the first organization and administrator');
    return { created: true, email: config.ADMIN_EMAIL, generatedPassword: config.ADMIN_PASSWORD ? undefined : password };
  });
}
