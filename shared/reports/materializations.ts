import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { Storage } from '../storage/storage.js';
import { ReportMaterializer, type Materialization } from './materializer.js';
import type { Execute } from './report-sql.js';
import { rollupMaterialization } from './rollups.js';
import { geofenceStays } from './stays.js';

/** Every materialization the reports read; one pass rebuilds each device-hour with all of them. */
export const materializations: readonly Materialization[] = [geofenceStays, rollupMaterialization];

/** Retention: what every materialization keeps from before `cutoff` goes with the positions it came from. */
export async function deleteKeptBefore(execute: Execute, cutoff: Date): Promise<void> {
  for (const materialization of materializations) await materialization.deleteBefore(execute, cutoff);
}

/** The materializer of this process, started; none when REPORTS_MATERIALIZE_INTERVAL_MS is 0. */
export function startReportMaterializer(storage: Storage, config: Config, logger: Logger): ReportMaterializer | undefined {
  if (config.REPORTS_MATERIALIZE_INTERVAL_MS === 0) return undefined;
  const materializer = new ReportMaterializer(storage, materializations, logger, {
    intervalMs: config.REPORTS_MATERIALIZE_INTERVAL_MS,
    lagMs: config.REPORTS_MATERIALIZE_LAG_MS,
    duty: config.REPORTS_MATERIALIZE_DUTY,
  });
  materializer.start();
  return materializer;
}
