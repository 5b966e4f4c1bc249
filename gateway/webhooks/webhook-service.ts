import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../shared/config.js';
import type { JobQueue } from '../../shared/jobs/index.js';
import type { Logger } from '../../shared/logger.js';
import type { Storage } from '../../shared/storage/index.js';
import { enqueueEvents, policyOf, rescuePending, subscribedTypes, wake, type DeliveryPolicy, type EnqueuedDelivery, type Execute, type WebhookEvent } from '../../shared/webhooks/deliveries.js';
import type { AlarmEventHook, AlarmEventMessage } from '../alarms/alarm-service.js';
import type { Detections, ZoneEventRecord } from '../detection/detection-engine.js';

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
    },
  };
}

/**
 * Enqueues webhook deliveries where events are stored, on the node that stored them, never from the bus (every
 * gateway receives every bus message, and the bus is at most once). Alarm events are enqueued inside the alarm's
 * own transaction: exactly once, even across a crash. Zone events and event-area triggers right after the
 * detection outbox stores them. The jobs only wake deliveries up; the rows are the record, re-scheduled from
 * storage at boot and whenever one is overdue.
 */
export class WebhookService {
  readonly policy: DeliveryPolicy;
  private rescueTimer?: NodeJS.Timeout;

  constructor(
    private readonly storage: Storage,
    private readonly jobs: JobQueue,
    config: Config,
    private readonly logger: Logger,
  ) {
    this.policy = policyOf(config);
  }

  /** Given to the alarm service: stores the deliveries in the alarm's transaction, wakes them after its commit. */
  readonly alarmHook: AlarmEventHook = {
    stored: (tx: EntityManager, message: AlarmEventMessage) => enqueueEvents(((sql: string, params: unknown[]) => tx.execute(sql, params)) as Execute, [alarmWebhookEvent(message)]),
    committed: (handle: unknown) => this.wake(handle as EnqueuedDelivery[]),
  };

  /** Zone events and triggers the detection outbox has just stored: those some webhook of their organization asks for. */
  async detectionsStored(zoneEvents: readonly ZoneEventRecord[], triggered: Detections['triggered']): Promise<void> {
    if (zoneEvents.length === 0 && triggered.length === 0) return;
    const execute = ((sql: string, params: unknown[]) => this.storage.execute(sql, params)) as Execute;
    try {
      const organizations = new Set<string>();
      for (const event of zoneEvents) organizations.add(event.organizationId);
      for (const trigger of triggered) organizations.add(trigger.organizationId);
      const wanted = await subscribedTypes(execute, [...organizations]);
      if (wanted.size === 0) return;
      const events: WebhookEvent[] = [];
      for (const event of zoneEvents) {
        if (event.zoneKind === 'geofence' && wanted.get(event.organizationId)?.has(event.type === 'enter' ? 'geofence.enter' : 'geofence.exit')) events.push(zoneWebhookEvent(event));
      }
      const now = new Date().toISOString();
      for (const trigger of triggered) {
        if (!wanted.get(trigger.organizationId)?.has('device.event')) continue;
        events.push({
          organizationId: trigger.organizationId,
          buildingId: trigger.event.buildingId,
          type: 'device.event',
          key: `trigger:${randomUUID()}`, // a trigger has no identity of its own; it is enqueued once, here
          timestamp: now,
          data: { organization_id: trigger.organizationId, device_id: trigger.deviceId, building_id: trigger.event.buildingId, event: trigger.event },
        });
      }
      if (events.length > 0) await this.wake(await enqueueEvents(execute, events));
    } catch (error) {
      this.logger.error({ err: error, events: zoneEvents.length + triggered.length }, 'could not enqueue webhook events');
    }
  }

  private async wake(deliveries: readonly EnqueuedDelivery[] | undefined): Promise<void> {
    if (!deliveries?.length) return;
    // Stored already: a wake-up that fails is found by the overdue rescue.
    await wake((job, options) => this.jobs.schedule(job, options), this.policy, deliveries).catch((error) => this.logger.warn({ err: error }, 'could not wake webhook deliveries; the rescue will'));
  }

  /** Schedules every pending delivery from storage, then looks for overdue ones (and old successes to forget) every minute. */
  async start(): Promise<void> {
    const schedule = (job: Parameters<JobQueue['schedule']>[0], options?: Parameters<JobQueue['schedule']>[1]) => this.jobs.schedule(job, options);
    await rescuePending(this.storage, schedule, this.policy).catch((error) => this.logger.warn({ err: error }, 'could not re-schedule webhook deliveries at boot'));
    this.rescueTimer = setInterval(() => {
      void (async () => {
        const rescued = await rescuePending(this.storage, schedule, this.policy, RESCUE_EVERY_MS);
        if (rescued > 0) this.logger.warn({ rescued }, 'overdue webhook deliveries re-scheduled');
        await this.storage.execute(`delete from webhook_deliveries where status = 'succeeded' and updated_at < now() - make_interval(days => ?)`, [KEEP_DELIVERED_DAYS]);
      })().catch((error) => this.logger.warn({ err: error }, 'webhook rescue failed'));
    }, RESCUE_EVERY_MS);
    this.rescueTimer.unref();
  }

  stop(): void {
    clearInterval(this.rescueTimer);
  }
}
