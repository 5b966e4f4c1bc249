import type { Processor, ProcessorRegistry } from '../jobs/job-queue.js';
import { jobDuration, jobFailures } from './metrics.js';

/**
 * Wraps each processor so its runs are timed and its failures counted, by job and (for reports) by report, in
 * whichever process runs it: the in-process runner in the gateway or a BullMQ worker. `reportOf` names the
 * report of a job's data, or undefined; it must return one of a fixed set of names (labels stay bounded).
 */
export function instrumentProcessors(
  processors: ProcessorRegistry,
  reportOf: (name: string, data: unknown) => string | undefined,
): ProcessorRegistry {
  return Object.fromEntries(
    Object.entries(processors).map(([name, processor]): [string, Processor] => [
      name,
      async (data, context, limits) => {
        const report = reportOf(name, data) ?? 'none';
        const stop = jobDuration.startTimer({ job: name, report });
        try {
          return await processor(data, context, limits);
        } catch (error) {
          jobFailures.inc({ job: name, report });
          throw error;
        } finally {
          stop();
        }
      },
    ]),
  );
}
