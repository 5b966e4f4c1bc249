import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import type { JobRequest, ProcessorContext, ScheduleOptions } from '../jobs/job-queue.js';
import { webhookAttempts } from '../metrics/metrics.js';
import { pgArray } from '../storage/pg-array.js';
import type { Storage } from '../storage/storage.js';
import { sign } from './signature.js';
import { send } from './webhook-sender.js';

/** Every event a webhook may ask for. */
export const WEBHOOK_EVENTS = [
  'alarm.raised',
  'alarm.updated',
  'alarm.state_changed',
  'alarm.escalated',
  'geofence.enter',
  'geofence.exit',
  'device.event',
  'evacuation.started',
  'evacuation.person_safe',
  'evacuation.ended',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];

export const WEBHOOK_DELIVERY_JOB = 'webhook-delivery';

/**
 * How deliveries are attempted: each process takes it from its own configuration (policyOf), never from a job,
 * so whoever can write to the job queue cannot lift the address rules.
 */
export interface DeliveryPolicy {
  timeoutMs: number;
  allowPrivate: boolean;
  /** Seconds before each retry; a delivery is dead after `1 + retrySchedule.length` failed attempts. */
  retrySchedule: number[];
}

export const policyOf = (config: {
  WEBHOOK_TIMEOUT_MS: number;
  WEBHOOK_ALLOW_PRIVATE_ADDRESSES: boolean;
  WEBHOOK_RETRY_SCHEDULE: number[];
}): DeliveryPolicy => ({
  timeoutMs: config.WEBHOOK_TIMEOUT_MS,
  allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_ADDRESSES,
  retrySchedule: config.WEBHOOK_RETRY_SCHEDULE,
});

/**
 * A delivery job only wakes work stored in webhook_deliveries. `webhookId`: send the next fresh delivery of that
 * webhook. `deliveryId`: retry that delivery; only the job carrying its current token acts, so a superseded or
 * duplicated job does nothing.
 */
export type DeliveryJob = { webhookId: string } | { deliveryId: string; token: string };

/** One event, built once, owed to every webhook of the organization that asked for its type (and building). */
export interface WebhookEvent {
  organizationId: string;
  buildingId: number | null;
  type: WebhookEventType;
  /** Names the event: enqueuing the same key twice for a webhook stores one delivery. */
  key: string;
  /** What order is kept for: `alarm:<id>` for an alarm's events, `device:<id>` for a device's; null for none. */
  orderKey: string | null;
  /** When it happened (ISO 8601), the body's `timestamp`. */
  timestamp: string;
  data: unknown;
}

export type Execute = <T>(sql: string, params: unknown[]) => Promise<T[]>;
export type Schedule = (job: JobRequest, options?: ScheduleOptions) => Promise<void>;

/** A webhook that has fresh deliveries to send. */
export interface WokenWebhook {
  webhook_id: string;
  organization_id: string;
}

export interface Enqueued {
  woken: WokenWebhook[];
  /** Deliveries not stored because their webhook held `maxPending` pending ones already. */
  capped: { webhook_id: string; count: number }[];
}

/**
 * The event types the webhooks of each of `organizationIds` ask for. Read before a batch of detected events is
 * built, so a batch nobody subscribed to is neither built nor sent to the database: at thousands of zone events a
 * second their JSON was most of the gateway's statement traffic. A webhook created while a batch is stored may
 * miss that batch, as it would had it been created a moment later.
 */
export async function subscribedTypes(execute: Execute, organizationIds: readonly string[]): Promise<Map<string, Set<string>>> {
  const wanted = new Map<string, Set<string>>();
  if (organizationIds.length === 0) return wanted;
  const rows = await execute<{ organization_id: string; type: string }>(
    `select distinct w.organization_id::text as organization_id, t.type
     from webhooks w cross join jsonb_array_elements_text(w.events) as t(type)
     where w.organization_id = any(?::uuid[])`,
    [pgArray(organizationIds)],
  );
  for (const row of rows) {
    let types = wanted.get(row.organization_id);
    if (!types) wanted.set(row.organization_id, (types = new Set()));
    types.add(row.type);
  }
  return wanted;
}

/**
 * Stores the deliveries events owe, in the caller's transaction when `execute` is one: with the events themselves,
 * so an event is enqueued if and only if it is stored. One statement for a whole batch.
 * - An `alarm.updated` replaces the payload of its alarm's last pending update not yet attempted, instead of
 *   queueing behind it: a burst of updates of one alarm is one delivery, carrying the latest state, still after
 *   the alarm's earlier events.
 * - A webhook holding `maxPending` pending deliveries takes no more, except `alarm.raised` (bounded by the alarms
 *   stored, and what a control room must not miss); what the cap turned away is returned, to be counted.
 */
export async function enqueueEvents(execute: Execute, events: readonly WebhookEvent[], maxPending: number): Promise<Enqueued> {
  if (events.length === 0) return { woken: [], capped: [] };
  // Within the batch too, the latest update of an alarm takes the place of the first.
  // `c`: may coalesce with a stored update (not when an earlier event of its alarm is in this batch: it would overtake it).
  const rows: {
    i: number;
    organization_id: string;
    building_id: number | null;
    key: string;
    type: string;
    order_key: string | null;
    body: string;
    c: boolean;
  }[] = [];
  const lastUpdate = new Map<string, number>();
  const seen = new Set<string>();
  for (const event of events) {
    const body = JSON.stringify({ type: event.type, timestamp: event.timestamp, data: event.data });
    const slot = event.orderKey ? `${event.organizationId}|${event.orderKey}` : undefined;
    const earlier = slot !== undefined && event.type === 'alarm.updated' ? lastUpdate.get(slot) : undefined;
    if (earlier !== undefined) {
      rows[earlier]!.body = body;
      continue;
    }
    if (slot !== undefined) {
      if (event.type === 'alarm.updated') lastUpdate.set(slot, rows.length);
      else lastUpdate.delete(slot);
    }
    rows.push({
      i: rows.length,
      organization_id: event.organizationId,
      building_id: event.buildingId,
      key: event.key,
      type: event.type,
      order_key: event.orderKey,
      body,
      c: event.type === 'alarm.updated' && slot !== undefined && !seen.has(slot),
    });
    if (slot !== undefined) seen.add(slot);
  }
  const result = await execute<{ kind: 'woken' | 'capped'; webhook_id: string; organization_id: string; count: number }>(
    `with e as (
       select * from jsonb_to_recordset(?::jsonb) as e(i int, organization_id uuid, building_id int, key text, type text, order_key text, body text, c boolean)
     ),
     targets as (
       select e.*, w.id as webhook_id
       from e join webhooks w on w.organization_id = e.organization_id and w.events @> jsonb_build_array(e.type)
         and (w.building_ids is null or w.building_ids @> jsonb_build_array(e.building_id))
     ),
     coalesced as (
       update webhook_deliveries d set payload = t.body, updated_at = now()
       from targets t
       where t.c and d.webhook_id = t.webhook_id and d.order_key = t.order_key and d.event_type = 'alarm.updated'
         and d.status = 'pending' and d.attempts = 0 and d.sending_until is null
         and not exists (select 1 from webhook_deliveries x where x.webhook_id = d.webhook_id and x.order_key = d.order_key and x.status = 'pending' and x.seq > d.seq)
       returning d.webhook_id, d.organization_id, t.i
     ),
     counts as (
       select webhook_id, count(*)::int as pending from webhook_deliveries
       where status = 'pending' and webhook_id in (select webhook_id from targets) group by webhook_id
     ),
     fresh as (
       select t.*, coalesce(c.pending, 0) + row_number() over (partition by t.webhook_id order by t.i) as rank
       from targets t left join counts c on c.webhook_id = t.webhook_id
       where not exists (select 1 from coalesced k where k.webhook_id = t.webhook_id and k.i = t.i)
     ),
     inserted as (
       insert into webhook_deliveries (id, webhook_id, organization_id, event_key, event_type, order_key, priority, payload)
       select gen_random_uuid(), f.webhook_id, f.organization_id, f.key, f.type, f.order_key, case when f.type = 'alarm.raised' then 0 else 1 end, f.body
       from fresh f where f.type = 'alarm.raised' or f.rank <= ?
       order by f.i, f.webhook_id
       on conflict (webhook_id, event_key) do nothing
       returning webhook_id, organization_id
     )
     select distinct 'woken' as kind, webhook_id::text, organization_id::text, 0 as count from (select webhook_id, organization_id from inserted union all select webhook_id, organization_id from coalesced) as w
     union all
     select 'capped', webhook_id::text, organization_id::text, count(*)::int from fresh where type <> 'alarm.raised' and rank > ? group by webhook_id, organization_id`,
    [JSON.stringify(rows), maxPending, maxPending],
  );
  return {
    woken: result.filter((row) => row.kind === 'woken').map(({ webhook_id, organization_id }) => ({ webhook_id, organization_id })),
    capped: result.filter((row) => row.kind === 'capped').map(({ webhook_id, count }) => ({ webhook_id, count: Number(count) })),
  };
}

/** Wakes the fresh lane of each webhook (one job each however many deliveries it was given). */
export async function wake(schedule: Schedule, webhooks: readonly WokenWebhook[]): Promise<void> {
  for (const webhook of webhooks) {
    const data: DeliveryJob = { webhookId: webhook.webhook_id };
    await schedule({ name: WEBHOOK_DELIVERY_JOB, organizationId: webhook.organization_id, data });
  }
}

/** Makes a new job the delivery's only live retry and queues it. */
export async function scheduleRetry(
  storage: Storage,
  schedule: Schedule,
  delivery: { id: string; organization_id: string },
  delayMs: number,
): Promise<void> {
  const token = randomUUID();
  await storage.execute('update webhook_deliveries set job_token = ? where id = ?', [token, delivery.id]);
  const data: DeliveryJob = { deliveryId: delivery.id, token };
  await schedule({ name: WEBHOOK_DELIVERY_JOB, organizationId: delivery.organization_id, data }, { delayMs });
}

/**
 * Wakes what storage says is owed: every webhook with fresh deliveries and every retry, at boot (the in-process
 * runner's timers died with the last process), then periodically those overdue by `overdueMs` (a wake-up lost
 * with Redis, a process that died mid-attempt).
 */
export async function rescuePending(storage: Storage, schedule: Schedule, overdueMs?: number): Promise<number> {
  const overdue = overdueMs === undefined ? '' : ' and updated_at < now() - make_interval(secs => ?)';
  const lanes = await storage.execute<WokenWebhook>(
    `select webhook_id::text, organization_id::text from webhook_deliveries where status = 'pending' and attempts = 0${overdue} group by webhook_id, organization_id`,
    overdueMs === undefined ? [] : [overdueMs / 1000],
  );
  await wake(schedule, lanes);
  const retries = await storage.execute<{ id: string; organization_id: string; next_attempt_at: Date | string }>(
    `select id, organization_id, next_attempt_at from webhook_deliveries where status = 'pending' and attempts > 0${overdueMs === undefined ? '' : ' and next_attempt_at < now() - make_interval(secs => ?)'}`,
    overdueMs === undefined ? [] : [overdueMs / 1000],
  );
  for (const retry of retries)
    await scheduleRetry(storage, schedule, retry, Math.max(0, new Date(retry.next_attempt_at).getTime() - Date.now()));
  return lanes.length + retries.length;
}

/** Seconds before retry number `attempt` (1-based), with ±20 % jitter so a recovering receiver is not stampeded. */
export function retryDelayMs(policy: DeliveryPolicy, failedAttempts: number, random = Math.random): number | undefined {
  const base = policy.retrySchedule[failedAttempts - 1];
  if (base === undefined) return undefined;
  return Math.round(base * 1000 * (0.8 + 0.4 * random()));
}

export type DeliveryStep = 'gone' | 'superseded' | 'idle' | 'not-due' | 'busy' | 'succeeded' | 'retrying' | 'dead';

interface Attempt {
  id: string;
  webhook_id: string;
  organization_id: string;
  attempts: number;
  payload: string;
  url: string;
  secret: string;
}

/** Leases an attempt of a delivery and of a webhook's fresh lane for the whole attempt, plus a margin. */
const leaseSeconds = (policy: DeliveryPolicy) => policy.timeoutMs / 1000 + 30;

/**
 * The delivery job: one attempt, then what follows from it. The attempt happens outside any transaction (an HTTP
 * call must not hold a database connection).
 * - Fresh lane (`webhookId`): under a lease on the webhook, the next fresh delivery goes out, `alarm.raised` first,
 *   then by seq, skipping any whose alarm (or device) has an earlier delivery still pending; then the next job.
 * - Retry lane (`deliveryId`): a delivery that failed once is retried on its own schedule, beside the fresh lane,
 *   so a receiver that refuses one payload delays nothing but that alarm's (or device's) later events.
 */
export function deliveryProcessor(policy: DeliveryPolicy) {
  return async (job: DeliveryJob, context: ProcessorContext): Promise<DeliveryStep> => {
    const schedule = context.schedule;
    if (!schedule) throw new Error('webhook deliveries need a job runner that schedules');
    if ('webhookId' in job && typeof job.webhookId === 'string')
      return sendFresh(job.webhookId, policy, context.storage, schedule, context.logger);
    if ('deliveryId' in job && typeof job.deliveryId === 'string')
      return retry(job.deliveryId, job.token, policy, context.storage, schedule, context.logger);
    return 'gone';
  };
}

/** Eligible fresh deliveries of a webhook, best first (see the migration m0017 for the columns). */
const NEXT_FRESH = `select d.id from webhook_deliveries d
  where d.webhook_id = ? and d.status = 'pending' and d.attempts = 0 and (d.sending_until is null or d.sending_until < now())
    and not exists (select 1 from webhook_deliveries e where e.webhook_id = d.webhook_id and e.order_key = d.order_key and e.status = 'pending' and e.seq < d.seq)
  order by d.priority, d.seq limit 1`;

async function sendFresh(
  webhookId: string,
  policy: DeliveryPolicy,
  storage: Storage,
  schedule: Schedule,
  logger: Logger,
): Promise<DeliveryStep> {
  const [webhook] = await storage.execute<{ organization_id: string }>(
    `update webhooks set delivering_until = now() + make_interval(secs => ?) where id = ? and (delivering_until is null or delivering_until < now()) returning organization_id`,
    [leaseSeconds(policy), webhookId],
  );
  // Busy: the holder looks again after it lets go, so what woke this job is not left behind.
  if (!webhook) return 'busy';
  let step: DeliveryStep = 'idle';
  try {
    const [attempt] = await storage.execute<Attempt>(
      `update webhook_deliveries d set sending_until = now() + make_interval(secs => ?) from webhooks w
       where d.id = (${NEXT_FRESH}) and w.id = d.webhook_id
       returning d.id, d.webhook_id, d.organization_id, d.attempts, d.payload, w.url, w.secret`,
      [leaseSeconds(policy), webhookId],
    );
    if (attempt) step = await attemptOnce(attempt, policy, storage, schedule, logger);
  } finally {
    await storage.execute('update webhooks set delivering_until = null where id = ?', [webhookId]);
  }
  const [more] = step === 'idle' ? await storage.execute(NEXT_FRESH, [webhookId]) : [true];
  if (more) await wake(schedule, [{ webhook_id: webhookId, organization_id: webhook.organization_id }]);
  return step;
}

async function retry(
  deliveryId: string,
  token: string,
  policy: DeliveryPolicy,
  storage: Storage,
  schedule: Schedule,
  logger: Logger,
): Promise<DeliveryStep> {
  const [delivery] = await storage.execute<{
    status: string;
    job_token: string | null;
    organization_id: string;
    next_attempt_at: Date | string;
  }>('select status, job_token, organization_id, next_attempt_at from webhook_deliveries where id = ?', [deliveryId]);
  if (delivery?.status !== 'pending') return 'gone';
  if (delivery.job_token !== token) return 'superseded';
  const wait = new Date(delivery.next_attempt_at).getTime() - Date.now();
  if (wait > 0) {
    await scheduleRetry(storage, schedule, { id: deliveryId, organization_id: delivery.organization_id }, wait);
    return 'not-due';
  }
  const [attempt] = await storage.execute<Attempt>(
    `update webhook_deliveries d set sending_until = now() + make_interval(secs => ?) from webhooks w
     where d.id = ? and d.status = 'pending' and w.id = d.webhook_id and (d.sending_until is null or d.sending_until < now())
     returning d.id, d.webhook_id, d.organization_id, d.attempts, d.payload, w.url, w.secret`,
    [leaseSeconds(policy), deliveryId],
  );
  if (!attempt) return 'busy';
  const step = await attemptOnce(attempt, policy, storage, schedule, logger);
  // Settled: what of its alarm (or device) waited behind it may go now.
  if (step !== 'retrying') await wake(schedule, [{ webhook_id: attempt.webhook_id, organization_id: attempt.organization_id }]);
  return step;
}

/** Sends one attempt of a leased delivery and records it; a failure goes to (or stays in) the retry lane. */
async function attemptOnce(
  delivery: Attempt,
  policy: DeliveryPolicy,
  storage: Storage,
  schedule: Schedule,
  logger: Logger,
): Promise<DeliveryStep> {
  const timestamp = Math.floor(Date.now() / 1000);
  const headers = {
    'webhook-id': delivery.id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': sign(delivery.secret, delivery.id, timestamp, delivery.payload),
  };
  const outcome = await send(delivery.url, delivery.payload, headers, policy);
  if (outcome.detail)
    logger.debug({ webhook: delivery.webhook_id, delivery: delivery.id, detail: outcome.detail }, 'webhook attempt failed');
  const attempts = delivery.attempts + 1;
  const retryIn = outcome.ok ? undefined : retryDelayMs(policy, attempts);
  const step: DeliveryStep = outcome.ok ? 'succeeded' : retryIn === undefined ? 'dead' : 'retrying';
  const token = step === 'retrying' ? randomUUID() : null;
  const entry = { at: new Date().toISOString(), response_code: outcome.status, error: outcome.error, duration_ms: outcome.durationMs };
  await storage.execute(
    `update webhook_deliveries set status = ?, attempts = ?, last_response_code = ?, last_error = ?, attempt_log = attempt_log || ?::jsonb,
       next_attempt_at = now() + make_interval(secs => ?), sending_until = null, job_token = coalesce(?::uuid, job_token), updated_at = now() where id = ?`,
    [
      step === 'retrying' ? 'pending' : step,
      attempts,
      outcome.status,
      outcome.error,
      JSON.stringify([entry]),
      (retryIn ?? 0) / 1000,
      token,
      delivery.id,
    ],
  );
  webhookAttempts[outcome.ok ? 'delivered' : outcome.error?.startsWith('refused') ? 'refused' : step === 'dead' ? 'dead' : 'failed'].inc();
  if (step === 'retrying') {
    const data: DeliveryJob = { deliveryId: delivery.id, token: token! };
    await schedule({ name: WEBHOOK_DELIVERY_JOB, organizationId: delivery.organization_id, data }, { delayMs: retryIn! });
  }
  if (step === 'dead') logger.warn({ webhook: delivery.webhook_id, delivery: delivery.id, attempts }, 'webhook delivery dead-lettered');
  return step;
}
