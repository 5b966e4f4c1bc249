import type { Config } from '../../shared/config.js';
import type { ProcessorRegistry } from '../../shared/jobs/index.js';
import { instrumentProcessors } from '../../shared/metrics/job-metrics.js';
import { REPORT_NAMES } from '../../shared/reports/report-params.js';
import { reportProcessor } from './report.processor.js';
import { webhookDeliveryProcessor } from './webhook-delivery.processor.js';
import { policyOf, WEBHOOK_DELIVERY_JOB } from '../../shared/webhooks/deliveries.js';
import { ERASURE_JOB, runErasure } from '../../shared/privacy/erasure.js';
import { DATA_EXPORT_JOB, runDataExport, type DataExportJob } from '../../shared/privacy/data-export.js';
import { EVACUATION_REPORT_JOB, runEvacuationReport } from '../../shared/evacuations/evacuation-report.js';

/**
 * Every job processor, by name. The same registry runs on the in-process runner (no Redis) and on BullMQ
 * workers (`npm run workers`), so a processor is written once. Built from the process's own configuration:
 * what a job may do is decided there, not by the job's data.
 */
export const processorsFor = (config: Config): ProcessorRegistry =>
  instrumentProcessors(
    {
      /** Analytics reports (spec 4.4), run in the database. */
      report: reportProcessor,
      /** The report of one evacuation (issue 31): timeline, time to 50/90/100% accounted, arrivals per assembly point. */
      [EVACUATION_REPORT_JOB]: async (data: unknown, { storage }, limits) => runEvacuationReport(storage, data, limits),
      /** Outbound webhooks: one attempt (a webhook's next fresh delivery, or a retry), then what follows from it. */
      [WEBHOOK_DELIVERY_JOB]: webhookDeliveryProcessor(policyOf(config)),
      /** Erasure of one person's history (issue 32), from its `erasure_requests` row; resumes where a run stopped. */
      [ERASURE_JOB]: async (data: { id: string }, { storage }) => runErasure(storage, data.id),
      /** A person's data export (issue 32): everything held about them, as a zip in the result. */
      [DATA_EXPORT_JOB]: async (data: DataExportJob, { storage }) => runDataExport(storage, data),
      /** Diagnostics: proves a worker is consuming and can reach storage (`npm run admin -- check-workers`). */
      'storage-check': async (_data, { storage }) => {
        const [row] = await storage.execute<{ now: string }>('select now()::text as now');
        return { storage: storage.kind, databaseTime: row?.now ?? null };
      },
    },
    reportOf,
  );

/** The report a `report` job runs, when it is one we know (a metrics label: never an arbitrary string). */
function reportOf(name: string, data: unknown): string | undefined {
  const report = name === 'report' ? (data as { report?: unknown } | null)?.report : undefined;
  return typeof report === 'string' && (REPORT_NAMES as readonly string[]).includes(report) ? report : undefined;
}
