import { randomUUID } from 'node:crypto';
import type { JobRequest, ProcessorContext, ScheduleOptions } from '../jobs/job-queue.js';
import { pgArray } from '../storage/pg-array.js';
import type { Storage } from '../storage/storage.js';
import { sign } from './signature.js';
import { send } from './webhook-sender.js';

/** Every event a webhook may ask for. */
export const WEBHOOK_EVENTS = ['alarm.raised', 'alarm.updated', 'alarm.state_changed', 'alarm.escalated', 'geofence.enter', 'geofence.exit', 'device.event'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];

export const WEBHOOK_DELIVERY_JOB = 'webhook-delivery';

/**
 * How deliveries are attempted. It travels in each job, like a report's deadline: the gateway that enqueues
 * decides, and a worker elsewhere carries it out without configuration of its own.
 */
export interface DeliveryPolicy {
  timeoutMs: number;
  allowPrivate: boolean;
  /** Seconds before each retry; a delivery is dead after `1 + retrySchedule.length` failed attempts. */
  retrySchedule: number[];
}

export const policyOf = (config: { WEBHOOK_TIMEOUT_MS: number; WEBHOOK_ALLOW_PRIVATE_ADDRESSES: boolean; WEBHOOK_RETRY_SCHEDULE: number[] }): DeliveryPolicy => ({
  timeoutMs: config.WEBHOOK_TIMEOUT_MS,
  allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_ADDRESSES,
  retrySchedule: config.WEBHOOK_RETRY_SCHEDULE,
});

export interface DeliveryJob {
  deliveryId: string;
  /** Only the job carrying the delivery's current token acts: a superseded or duplicated job does nothing. */
  token: string;
  policy: DeliveryPolicy;
}

/** One event, built once, owed to every webhook of the organization that asked for its type (and building). */
export interface WebhookEvent {
  organizationId: string;
  buildingId: number | null;
  type: WebhookEventType;
  /** Names the event: enqueuing the same key twice for a webhook stores one delivery. */
  key: string;
  /** When it happened (ISO 8601), the body's `timestamp`. */
  timestamp: string;
  data: unknown;
}

export type Execute = <T>(sql: string, params: unknown[]) => Promise<T[]>;
export type Schedule = (job: JobRequest, options?: ScheduleOptions) => Promise<void>;

export interface EnqueuedDelivery {
  id: string;
  organization_id: string;
  job_token: string;
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
 * so an event is enqueued if and only if it is stored. One statement for a whole batch, cheap when nobody
 * subscribed; a webhook's deliveries take `seq` in the order of `events`.
 */
export async function enqueueEvents(execute: Execute, events: readonly WebhookEvent[]): Promise<EnqueuedDelivery[]> {
  if (events.length === 0) return [];
  const rows = events.map((event, i) => ({
    i,
    organization_id: event.organizationId,
    building_id: event.buildingId,
    key: event.key,
    type: event.type,
    body: JSON.stringify({ type: event.type, timestamp: event.timestamp, data: event.data }),
  }));
  return execute<EnqueuedDelivery>(
    `insert into webhook_deliveries (id, webhook_id, organization_id, event_key, event_type, payload, job_token)
     select gen_random_uuid(), w.id, w.organization_id, e.key, e.type, e.body, gen_random_uuid()
     from jsonb_to_recordset(?::jsonb) as e(i int, organization_id uuid, building_id int, key text, type text, body text)
     join webhooks w on w.organization_id = e.organization_id and w.events @> jsonb_build_array(e.type)
       and (w.building_ids is null or w.building_ids @> jsonb_build_array(e.building_id))
     order by e.i, w.id
     on conflict (webhook_id, event_key) do nothing
     returning id, organization_id, job_token`,
    [JSON.stringify(rows)],
  );
}

/** Wakes freshly stored deliveries (each one not at the head of its webhook's line just waits its turn). */
export async function wake(schedule: Schedule, policy: DeliveryPolicy, deliveries: readonly EnqueuedDelivery[]): Promise<void> {
  for (const delivery of deliveries) {
    const data: DeliveryJob = { deliveryId: delivery.id, token: delivery.job_token, policy };
    await schedule({ name: WEBHOOK_DELIVERY_JOB, organizationId: delivery.organization_id, data });
  }
}

/** Makes a new job the delivery's only live one and queues it. */
export async function scheduleDelivery(storage: Storage, schedule: Schedule, policy: DeliveryPolicy, delivery: { id: string; organization_id: string }, delayMs: number): Promise<void> {
  const token = randomUUID();
  await storage.execute('update webhook_deliveries set job_token = ? where id = ?', [token, delivery.id]);
  const data: DeliveryJob = { deliveryId: delivery.id, token, policy };
  await schedule({ name: WEBHOOK_DELIVERY_JOB, organizationId: delivery.organization_id, data }, { delayMs });
}

/**
 * Re-schedules the head of every webhook's line from storage: at boot (the in-process runner's timers died with
 * the last process) and then periodically for heads overdue by `overdueMs` (a wake-up lost with Redis).
 */
export async function rescuePending(storage: Storage, schedule: Schedule, policy: DeliveryPolicy, overdueMs?: number): Promise<number> {
  const heads = await storage.execute<{ id: string; organization_id: string; next_attempt_at: Date | string }>(
    `select distinct on (webhook_id) id, organization_id, next_attempt_at from webhook_deliveries
     where status = 'pending' order by webhook_id, seq`,
  );
  let rescued = 0;
  for (const head of heads) {
    const wait = new Date(head.next_attempt_at).getTime() - Date.now();
    if (overdueMs !== undefined && wait > -overdueMs) continue;
    await scheduleDelivery(storage, schedule, policy, head, Math.max(0, wait));
    rescued += 1;
  }
  return rescued;
}

interface DeliveryRow {
  id: string;
  webhook_id: string;
  organization_id: string;
  status: 'pending' | 'succeeded' | 'dead';
  attempts: number;
  payload: string;
  next_attempt_at: Date | string;
  job_token: string | null;
  url: string;
  secret: string;
}

/** Seconds before retry number `attempt` (1-based), with ±20 % jitter so a recovering receiver is not stampeded. */
export function retryDelayMs(policy: DeliveryPolicy, failedAttempts: number, random = Math.random): number | undefined {
  const base = policy.retrySchedule[failedAttempts - 1];
  if (base === undefined) return undefined;
  return Math.round(base * 1000 * (0.8 + 0.4 * random()));
}

export type DeliveryStep = 'gone' | 'superseded' | 'waiting-turn' | 'not-due' | 'busy' | 'succeeded' | 'retrying' | 'dead';

/**
 * The delivery job. A webhook's deliveries go out one at a time in `seq` order: only the head of its line is
 * attempted, under a lease on the webhook; when the head is delivered or dead-lettered the next one is
 * scheduled. The attempt happens outside any transaction (an HTTP call must not hold a database connection).
 */
export async function processDelivery(job: DeliveryJob, context: ProcessorContext): Promise<DeliveryStep> {
  const { storage, logger } = context;
  const schedule = context.schedule;
  if (!schedule) throw new Error('webhook deliveries need a job runner that schedules');
  const { policy } = job;
  const [delivery] = await storage.execute<DeliveryRow>(
    `select d.id, d.webhook_id, d.organization_id, d.status, d.attempts, d.payload, d.next_attempt_at, d.job_token, w.url, w.secret
     from webhook_deliveries d join webhooks w on w.id = d.webhook_id where d.id = ?`,
    [job.deliveryId],
  );
  if (!delivery || delivery.status !== 'pending') return 'gone';
  if (delivery.job_token !== job.token) return 'superseded';
  const [head] = await storage.execute<{ id: string }>(`select id from webhook_deliveries where webhook_id = ? and status = 'pending' order by seq limit 1`, [delivery.webhook_id]);
  if (head?.id !== delivery.id) return 'waiting-turn'; // the one ahead schedules this one when it is done
  const wait = new Date(delivery.next_attempt_at).getTime() - Date.now();
  if (wait > 0) {
    await scheduleDelivery(storage, schedule, policy, delivery, wait);
    return 'not-due';
  }
  const leaseMs = policy.timeoutMs + 30_000;
  const leased = await storage.execute(
    `update webhooks set delivering_until = now() + make_interval(secs => ?) where id = ? and (delivering_until is null or delivering_until < now()) returning id`,
    [leaseMs / 1000, delivery.webhook_id],
  );
  if (leased.length === 0) {
    await scheduleDelivery(storage, schedule, policy, delivery, 1000);
    return 'busy';
  }
  let step: DeliveryStep;
  try {
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = { 'webhook-id': delivery.id, 'webhook-timestamp': String(timestamp), 'webhook-signature': sign(delivery.secret, delivery.id, timestamp, delivery.payload) };
    const outcome = await send(delivery.url, delivery.payload, headers, policy);
    const attempts = delivery.attempts + 1;
    const retryIn = outcome.ok ? undefined : retryDelayMs(policy, attempts);
    step = outcome.ok ? 'succeeded' : retryIn === undefined ? 'dead' : 'retrying';
    const entry = { at: new Date().toISOString(), response_code: outcome.status, error: outcome.error, duration_ms: outcome.durationMs };
    await storage.execute(
      `update webhook_deliveries set status = ?, attempts = ?, last_response_code = ?, last_error = ?, attempt_log = attempt_log || ?::jsonb,
         next_attempt_at = now() + make_interval(secs => ?), updated_at = now() where id = ?`,
      [step === 'retrying' ? 'pending' : step, attempts, outcome.status, outcome.error, JSON.stringify([entry]), (retryIn ?? 0) / 1000, delivery.id],
    );
    if (step === 'retrying') await scheduleDelivery(storage, schedule, policy, delivery, retryIn!);
    if (step === 'dead') logger.warn({ webhook: delivery.webhook_id, delivery: delivery.id, attempts }, 'webhook delivery dead-lettered');
  } finally {
    await storage.execute('update webhooks set delivering_until = null where id = ?', [delivery.webhook_id]);
  }
  if (step !== 'retrying') {
    const [next] = await storage.execute<{ id: string; organization_id: string; next_attempt_at: Date | string }>(
      `select id, organization_id, next_attempt_at from webhook_deliveries where webhook_id = ? and status = 'pending' order by seq limit 1`,
      [delivery.webhook_id],
    );
    if (next) await scheduleDelivery(storage, schedule, policy, next, Math.max(0, new Date(next.next_attempt_at).getTime() - Date.now()));
  }
  return step;
}
