import type { Storage } from '../../shared/storage/index.js';

/**
 * Whether an organization makes every report and history export pseudonymous for everyone but its admins
 * (`organizations.reports_pseudonymous`, written through PUT .../privacy_settings); false for an unknown one.
 */
export async function reportsPseudonymous(storage: Pick<Storage, 'execute'>, organizationId: string): Promise<boolean> {
  const [row] = await storage.execute<{ reports_pseudonymous: boolean }>('select reports_pseudonymous from organizations where id = ?', [
    organizationId,
  ]);
  return row?.reports_pseudonymous === true;
}
