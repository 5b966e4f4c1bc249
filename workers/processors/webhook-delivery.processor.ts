import type { Processor } from '../../shared/jobs/index.js';
import { processDelivery, type DeliveryJob } from '../../shared/webhooks/deliveries.js';

/**
 * One step of one webhook delivery (shared/webhooks/deliveries.ts): attempt it if it is due and first in its
 * webhook's line, record the outcome, schedule the retry or the next delivery. Never throws for a receiver's
 * failure: the retry schedule lives in the delivery row, not in the job queue.
 */
export const webhookDeliveryProcessor: Processor = async (job: DeliveryJob, context) => ({ step: await processDelivery(job, context) });
