import type { Processor } from '../../shared/jobs/index.js';
import { deliveryProcessor, type DeliveryJob, type DeliveryPolicy } from '../../shared/webhooks/deliveries.js';

/**
 * One step of webhook delivery (shared/webhooks/deliveries.ts): the next fresh delivery of a webhook, or one retry
 * of a delivery that failed; the outcome recorded, what follows scheduled. Never throws for a receiver's failure:
 * the retry schedule lives in the delivery row, not in the job queue. The policy (address rules, timeout, retry
 * schedule) is this process's own configuration: a job carries none.
 */
export const webhookDeliveryProcessor = (policy: DeliveryPolicy): Processor => {
  const deliver = deliveryProcessor(policy);
  return async (job: DeliveryJob, context) => ({ step: await deliver(job, context) });
};
