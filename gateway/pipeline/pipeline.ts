import type { Logger } from '../../shared/logger.js';

/**
 * One step of a pipeline over a batch. A critical step's failure fails the batch (nothing acknowledged);
 * any other step's failure is logged and the batch carries on (a detector bug must not lose positions).
 */
export interface PipelineStep<Context> {
  name: string;
  critical?: boolean;
  run(context: Context): Promise<void> | void;
}

export async function runPipeline<Context>(steps: readonly PipelineStep<Context>[], context: Context, logger: Logger): Promise<void> {
  for (const step of steps) {
    try {
      await step.run(context);
    } catch (error) {
      if (step.critical) throw error;
      logger.error({ err: error, step: step.name }, 'pipeline step failed; the batch carries on');
    }
  }
}
