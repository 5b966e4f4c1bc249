import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../shared/config.js';
import type { JobQueue } from '../../shared/jobs/index.js';
import type { Logger } from '../../shared/logger.js';
import { webhookDeliveriesCapped, webhookOldestPending } from '../../shared/metrics/metrics.js';
import type { Storage } from '../../shared/storage/index.js';
import {
  enqueueEvents,
  rescuePending,
  subscribedTypes,
  wake,
  type Enqueued,
  type Execute,
  type WebhookEvent,
} from '../../shared/webhooks/deliveries.js';
import type { AlarmEventMessage } from '../alarms/alarm-event-message.js';
import type { AlarmEventHook } from '../alarms/alarm-service.js';
import type { Detections, ZoneEventRecord } from '../detection/detections.js';
import { WebhookStore } from './webhook-store.js';
import { insertZoneEvents } from '../../shared/detection/zone-event-insert.js';

const RESCUE_EVERY_MS = 60_000;
const KEEP_DELIVERED_DAYS = 30;

/** The webhook event of a stored alarm event. Its key is the organization's alarm seq: one per event. */
export function alarmWebhookEvent(message: AlarmEventMessage): WebhookEvent {
  const { event: kind, ...alarm } = message.event;
  return {
    organizationId: message.organizationId,
    buildingId: message.buildingId,
    type: `alarm.${kind}`,
    key: `alarm:${alarm.seq}`,
    orderKey: `alarm:${alarm.id}`,
    timestamp: kind === 'raised' ? alarm.created_at : alarm.updated_at,
    data: alarm,
  };
}

/** The webhook event of a stored geofence enter or exit, keyed by what makes it unique (device, zone, kind, instant). */
export function zoneWebhookEvent(event: ZoneEventRecord): WebhookEvent {
  return {
    organizationId: event.organizationId,
    buildingId: event.buildingId,
    type: event.type === 'enter' ? 'geofence.enter' : 'geofence.exit',
    key: `zone:${event.deviceId}:${event.zoneId}:${event.type}:${event.at}`,
    orderKey: `device:${event.deviceId}`,
    timestamp: new Date(event.at).toISOString(),
    data: {
      organization_id: event.organizationId,
      building_id: event.buildingId,
      floor_id: event.floorId,
      geofence_id: event.zoneId,
      geofence_name: event.zoneName,
      device_id: event.deviceId,
      user_id: event.userId,
      type: event.type,
      at: new Date(event.at).toISOString(),
      fired_at: new Date(event.firedAt).toISOString(),
      // Event time (docs/event-time.md), as the WebSocket frame has it: found from fixes that arrived late, and a
      // correction names the earlier event of this device and zone it replaces by what a receiver was sent of it.
      late: event.late === true,
      delay_ms: event.late ? Math.round(event.delayMs ?? 0) : null,
      supersedes: event.supersedesAt !== undefined ? { type: event.type, at: new Date(event.supersedesAt).toISOString() } : null,
    },
  };
}

/**
 * Enqueues webhook deliveries where events are stored, on the node that stored them, never from the bus (every
 * gateway receives every bus message, and the bus is at most once). Alarm events are enqueued inside the alarm's
 * own transaction, zone events inside the one that stores them: exactly once, even across a crash. Event-area
 * triggers (stored nowhere else) right after detection. The jobs only wake deliveries up; the rows are the
 * record, re-scheduled from storage at boot and whenever one is overdue.
 */
export class WebhookService {
  private rescueTimer?: NodeJS.Timeout;
  private readonly maxPending: number;
  private readonly deadRetentionDays: number;
  /** The webhooks and deliveries the admin API reads and changes. */
  readonly store: WebhookStore;

  constructor(
    private readonly storage: Storage,
    private readonly jobs: JobQueue,
    config: Config,
    private readonly logger: Logger,
  ) {
    this.maxPending = config.WEBHOOK_MAX_PENDING_PER_WEBHOOK;
    this.deadRetentionDays = config.WEBHOOK_DEAD_RETENTION_DAYS;
    this.store = new WebhookStore(storage);
  }

  /** Given to the alarm service: stores the deliveries in the alarm's transaction, wakes them after its commit. */
  readonly alarmHook: AlarmEventHook = {
    stored: (tx: EntityManager, message: AlarmEventMessage) => this.enqueue(executeIn(tx), [alarmWebhookEvent(message)]),
    committed: (handle: unknown) => this.wake(handle as Enqueued),
  };

  /** Given to the evacuation service: deliveries stored in the roll change's own transaction, woken after its commit. */
  readonly evacuationHook = {
    stored: (tx: EntityManager, events: readonly WebhookEvent[]) => this.enqueue(executeIn(tx), events),
    committed: (enqueued: Enqueued) => this.wake(enqueued),
  };

  /**
   * Stores zone events the detectors found. When a webhook of their organizations asks for some of them, the
   * events and their deliveries are written in one transaction (a crash between the two would lose deliveries);
   * otherwise `groupCommit` stores them with the positions' group commit, as before webhooks.
   */
  async storeZoneEvents(zoneEvents: readonly ZoneEventRecord[], groupCommit: () => Promise<void>): Promise<void> {
    const owed = await this.owed(zoneEvents, []);
    if (owed.length === 0) return groupCommit();
    const enqueued = await this.storage.em().transactional(async (tx) => {
      const execute = executeIn(tx as EntityManager);
      await insertZoneEvents(execute, zoneEvents);
      return this.enqueue(execute, owed);
    });
    await this.wake(enqueued);
  }

  /**
   * The late path's corrections (late-detection.ts): what `write` stores (new events, superseded marks) and the
   * deliveries `zoneEvents` owe, in one transaction, as `storeZoneEvents` does for on-time ones.
   */
  async storeLateZoneEvents(zoneEvents: readonly ZoneEventRecord[], write: (execute: Execute) => Promise<void>): Promise<void> {
    const owed = await this.owed(zoneEvents, []);
    const enqueued = await this.storage.em().transactional(async (tx) => {
      const execute = executeIn(tx as EntityManager);
      await write(execute);
      return owed.length > 0 ? this.enqueue(execute, owed) : undefined;
    });
    await this.wake(enqueued);
  }

  /** Event-area triggers detection has just announced: those some webhook of their organization asks for. */
  async detectionsStored(_zoneEvents: readonly ZoneEventRecord[], triggered: Detections['triggered']): Promise<void> {
    if (triggered.length === 0) return;
    try {
      const events = await this.owed([], triggered);
      if (events.length > 0) await this.wake(await this.enqueue(executeIn(this.storage), events));
    } catch (error) {
      this.logger.error({ err: error, events: triggered.length }, 'could not enqueue webhook events');
    }
  }

  /** The webhook events of zone events and triggers some webhook of their organization asks for. */
  private async owed(zoneEvents: readonly ZoneEventRecord[], triggered: Detections['triggered']): Promise<WebhookEvent[]> {
    const organizations = new Set<string>();
    for (const event of zoneEvents) if (event.zoneKind === 'geofence') organizations.add(event.organizationId);
    for (const trigger of triggered) organizations.add(trigger.organizationId);
    if (organizations.size === 0) return [];
    const wanted = await subscribedTypes(executeIn(this.storage), [...organizations]);
    if (wanted.size === 0) return [];
    const events: WebhookEvent[] = [];
    for (const event of zoneEvents) {
      if (
        event.zoneKind === 'geofence' &&
        wanted.get(event.organizationId)?.has(event.type === 'enter' ? 'geofence.enter' : 'geofence.exit')
      )
        events.push(zoneWebhookEvent(event));
    }
    const now = new Date().toISOString();
    for (const trigger of triggered) {
      if (!wanted.get(trigger.organizationId)?.has('device.event')) continue;
      events.push({
        organizationId: trigger.organizationId,
        buildingId: trigger.event.buildingId,
        type: 'device.event',
        key: `trigger:${randomUUID()}`, // a trigger has no identity of its own; it is enqueued once, here
        orderKey: `device:${trigger.deviceId}`,
        timestamp: now,
        data: {
          organization_id: trigger.organizationId,
          device_id: trigger.deviceId,
          building_id: trigger.event.buildingId,
          event: trigger.event,
        },
      });
    }
    return events;
  }

  private async enqueue(execute: Execute, events: readonly WebhookEvent[]): Promise<Enqueued> {
    const enqueued = await enqueueEvents(execute, events, this.maxPending);
    for (const { webhook_id, count } of enqueued.capped) {
      webhookDeliveriesCapped.inc(count);
      this.logger.warn(
        { webhook: webhook_id, turnedAway: count, maxPending: this.maxPending },
        'webhook holds too many pending deliveries: new events not queued for it',
      );
    }
    return enqueued;
  }

  private async wake(enqueued: Enqueued | undefined): Promise<void> {
    if (!enqueued?.woken.length) return;
    // Stored already: a wake-up that fails is found by the overdue rescue.
    await wake((job, options) => this.jobs.schedule(job, options), enqueued.woken).catch((error) =>
      this.logger.warn({ err: error }, 'could not wake webhook deliveries; the rescue will'),
    );
  }

  /** Wakes a webhook's fresh lane (a redelivery was queued on it). */
  async wakeWebhook(webhookId: string, organizationId: string): Promise<void> {
    await this.wake({ woken: [{ webhook_id: webhookId, organization_id: organizationId }], capped: [] });
  }

  /** Forgets deliveries past their retention: delivered ones after 30 days, dead ones after WEBHOOK_DEAD_RETENTION_DAYS. */
  async prune(): Promise<void> {
    await this.storage.execute(
      `delete from webhook_deliveries where (status = 'succeeded' and updated_at < now() - make_interval(days => ?)) or (status = 'dead' and updated_at < now() - make_interval(days => ?))`,
      [KEEP_DELIVERED_DAYS, this.deadRetentionDays],
    );
  }

  /** Sets floorcast_webhook_oldest_pending_seconds: how long the oldest pending delivery has waited. */
  async measureBacklog(): Promise<void> {
    const [row] = await this.storage.execute<{ age: number | null }>(
      `select extract(epoch from now() - min(created_at))::float8 as age from webhook_deliveries where status = 'pending'`,
    );
    webhookOldestPending.set(Math.max(0, Number(row?.age ?? 0)));
  }

  /** Schedules every pending delivery from storage, then looks for overdue ones (and prunes, and measures) every minute. */
  async start(): Promise<void> {
    const schedule = (job: Parameters<JobQueue['schedule']>[0], options?: Parameters<JobQueue['schedule']>[1]) =>
      this.jobs.schedule(job, options);
    await rescuePending(this.storage, schedule).catch((error) =>
      this.logger.warn({ err: error }, 'could not re-schedule webhook deliveries at boot'),
    );
    this.rescueTimer = setInterval(() => {
      void (async () => {
        const rescued = await rescuePending(this.storage, schedule, RESCUE_EVERY_MS);
        if (rescued > 0) this.logger.warn({ rescued }, 'overdue webhook deliveries re-scheduled');
        await this.prune();
        await this.measureBacklog();
      })().catch((error) => this.logger.warn({ err: error }, 'webhook rescue failed'));
    }, RESCUE_EVERY_MS);
    this.rescueTimer.unref();
  }

  stop(): void {
    clearInterval(this.rescueTimer);
  }
}

const executeIn = (runner: { execute(sql: string, params: unknown[]): Promise<unknown> }): Execute =>
  ((sql: string, params: unknown[]) => runner.execute(sql, params)) as Execute;
