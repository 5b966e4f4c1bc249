import type { ProcessorRegistry } from '../../shared/jobs/index.js';
import { reportProcessor } from './report.processor.js';

/**
 * Every job processor, by name. The same registry runs on the in-process runner (no Redis) and on BullMQ
 * workers (`npm run workers`), so a processor is written once.
 */
export const processors: ProcessorRegistry = {
  /** Analytics reports (spec 4.4), run in the database. */
  report: reportProcessor,
  /** Diagnostics: proves a worker is consuming and can reach storage (`npm run admin -- check-workers`). */
  'storage-check': async (_data, { storage }) => {
    const [row] = await storage.execute<{ now: string }>('select now()::text as now');
    return { storage: storage.kind, databaseTime: row?.now ?? null };
  },
};
