import type { Bus } from '../bus-channels.js';
import type { Logger } from '../../shared/logger.js';
import type { Execute } from '../../shared/webhooks/deliveries.js';
import { zoneEventCounters } from '../../shared/metrics/metrics.js';
import type { PositionWriter } from '../../shared/positions/position-writer.js';
import type { AlarmService } from '../alarms/alarm-service.js';
import type { DetectedAlarm, Detections, ZoneEventRecord } from './detections.js';
import type { OutboxSink } from './detection-outbox.js';
import type { ZoneEventsMessage } from './zone-events-message.js';

/** Zone events per bus message (a few hundred KB packed); subscribers get one frame per message and topic. */
export const MAX_EVENTS_PER_MESSAGE = 2000;

/** What webhooks need of detection (gateway/webhooks/webhook-service.ts). */
export interface DetectionWebhooks {
  /** Stores zone events, with the deliveries they owe in the same transaction; `groupCommit` when they owe none. */
  storeZoneEvents(zoneEvents: readonly ZoneEventRecord[], groupCommit: () => Promise<void>): Promise<void>;
  /** Stores what `write` writes (the late path's corrections) with the deliveries `zoneEvents` owe, in one transaction. */
  storeLateZoneEvents(zoneEvents: readonly ZoneEventRecord[], write: (execute: Execute) => Promise<void>): Promise<void>;
  /** Told of zone events and triggers once stored and announced. */
  detectionsStored(zoneEvents: readonly ZoneEventRecord[], triggered: Detections['triggered']): Promise<void>;
}

export interface DetectionSinkDependencies {
  /** Zone events go through the group commit. */
  writer: PositionWriter;
  alarms: AlarmService;
  bus: Bus;
  logger: Logger;
  /** Webhooks, on this node only: zone events are stored with the deliveries they owe; triggers enqueued once announced. */
  webhooks?: DetectionWebhooks;
}

/**
 * Where the outbox puts what the detectors found: zone events stored (for reports, with the webhook deliveries
 * they owe), alarms raised through the alarm service, and, once everything of an entry is stored, its zone
 * events and triggers told to webhooks and announced to every gateway on the bus (gateway/ws/live-feeds.ts
 * pushes them to sockets).
 */
export class DetectionSink implements OutboxSink {
  constructor(private readonly deps: DetectionSinkDependencies) {}

  storeZoneEvents(zoneEvents: readonly ZoneEventRecord[]): Promise<void> {
    const { writer, webhooks } = this.deps;
    return webhooks ? webhooks.storeZoneEvents(zoneEvents, () => writer.write([], zoneEvents)) : writer.write([], zoneEvents);
  }

  async raiseAlarm(alarm: DetectedAlarm): Promise<void> {
    await this.deps.alarms.raiseAllOnce([{ ...alarm, by: 'system' as const }]);
  }

  /** Announces stored zone events and triggered event content to every gateway. */
  async announce({ zoneEvents, triggered }: Pick<Detections, 'zoneEvents' | 'triggered'>): Promise<void> {
    const { bus, logger, webhooks } = this.deps;
    // Counted here, once stored, so a retried outbox entry is not counted twice.
    for (const event of zoneEvents) zoneEventCounters[event.type][event.zoneKind].inc();
    if (zoneEvents.length === 0 && triggered.length === 0) return;
    await webhooks
      ?.detectionsStored(zoneEvents, triggered)
      .catch((error) => logger.error({ err: error }, 'webhook enqueue of stored detections failed'));
    const byOrganization = new Map<string, ZoneEventsMessage>();
    const messageOf = (organizationId: string) => {
      let message = byOrganization.get(organizationId);
      if (!message) byOrganization.set(organizationId, (message = { organizationId, zoneEvents: [], triggered: [] }));
      return message;
    };
    for (const event of zoneEvents) messageOf(event.organizationId).zoneEvents.push(event);
    for (const trigger of triggered) messageOf(trigger.organizationId).triggered.push(trigger);
    for (const message of byOrganization.values()) {
      // Bounded messages: one read of a shard can find a hundred thousand events, and a message that size
      // overruns Redis's output buffer for pub/sub clients, which then drops the subscriber (and its messages).
      for (let start = 0; start === 0 || start < message.zoneEvents.length; start += MAX_EVENTS_PER_MESSAGE) {
        const part = message.zoneEvents.slice(start, start + MAX_EVENTS_PER_MESSAGE);
        const triggeredPart = start === 0 ? message.triggered : [];
        await bus.publish('zone-events', { organizationId: message.organizationId, zoneEvents: part, triggered: triggeredPart });
      }
    }
  }
}
