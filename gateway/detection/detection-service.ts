import type { Bus } from '../../shared/bus/index.js';
import type { Logger } from '../../shared/logger.js';
import { zoneEventCounters } from '../../shared/metrics/metrics.js';
import type { PositionWriter } from '../../shared/positions/position-writer.js';
import { POSITIONS_CHANNEL, type PositionsMessage } from '../../shared/positions/positions-message.js';
import type { AlarmService } from '../alarms/alarm-service.js';
import type { DetectionSteps, PositionBatch } from '../pipeline/position-pipeline.js';
import type { BuildingRegistry } from '../realtime/building-registry.js';
import type { DetectionEngine, Detections, ZoneEventRecord } from './detection-engine.js';
import { DetectionOutbox, type OutboxAlarm } from './detection-outbox.js';
import { ZONE_EVENTS_CHANNEL, type ZoneEventsMessage } from './zone-events-message.js';

const PRUNE_EVERY_MS = 3600_000;

/**
 * Glue between the pure detectors and the rest: pipeline steps, the once-a-second sweep, and storage of what
 * was found (zone events for reports, alarms through the alarm service), announced on the bus once stored
 * (gateway/ws/live-feeds.ts pushes the announcements to sockets).
 *
 * Detector state moves on with every position, stored or not, so what it produces goes through an outbox that
 * retries until it is stored: nothing found during a database outage is lost, and idempotency keys keep a
 * retried alarm from counting twice.
 */
export class DetectionService {
  private sweepTimer?: NodeJS.Timeout;
  readonly outbox: DetectionOutbox;
  private lastPrune = 0;

  constructor(
    private readonly engine: DetectionEngine,
    private readonly alarms: AlarmService,
    private readonly registry: BuildingRegistry,
    /** Zone events go through the group commit, with the positions of the batch that caused them. */
    private readonly writer: PositionWriter,
    private readonly bus: Bus,
    private readonly logger: Logger,
    outboxMax = 100_000,
    /** Told of zone events and triggers once stored, on this node only (webhooks enqueue them there). */
    private readonly onStored?: (zoneEvents: readonly ZoneEventRecord[], triggered: Detections['triggered']) => Promise<void>,
  ) {
    this.outbox = new DetectionOutbox(
      {
        storeZoneEvents: (zoneEvents) => this.writer.write([], zoneEvents),
        raiseAlarms: async (alarms) => void (await this.alarms.raiseAllOnce(alarms.map((alarm) => ({ ...alarm, by: 'system' as const })))),
        announce: (entry) => this.announceZoneEvents(entry.zoneEvents, entry.triggered),
      },
      logger,
      outboxMax,
    );
  }

  /** Devices whose detector state is held in memory. */
  get trackedDevices(): number {
    return this.engine.trackedDevices;
  }

  /** The steps the position pipeline runs around persistence. */
  steps(): DetectionSteps {
    return {
      beforePersist: [
        // An alarm button pressed on the app is part of the upload: if it cannot be stored, the upload fails and is retried.
        { name: 'raise-requested-alarms', critical: true, run: (batch) => this.raiseRequested(batch) },
        { name: 'detect', run: (batch) => this.detect(batch) },
      ],
      // The batch's zone events were committed with its positions by then; its alarms are stored next.
      afterPersist: [{ name: 'announce-detections', run: (batch) => this.settle(batch.detections, true) }],
      // The detectors have moved on all the same: what they found is stored apart, so it is neither lost nor,
      // when the app resends the batch, found again.
      persistFailed: (batch) => void this.settle(batch.detections, false),
    };
  }

  async start(sweepIntervalMs = 1000): Promise<void> {
    // Positions accepted by other gateways keep this gateway's detector state in step (nothing is emitted for them).
    await this.bus.subscribe(POSITIONS_CHANNEL, (payload) => {
      const message = payload as PositionsMessage;
      if (message.originNode === this.bus.nodeId) return;
      for (const record of message.records) {
        const runtime = record.buildingId !== null ? this.registry.peek(record.buildingId) : undefined;
        if (runtime || record.buildingId === null) this.engine.observe(record, runtime, false);
        else void this.registry.get(record.organizationId, record.buildingId).then((loaded) => this.engine.observe(record, loaded, false), () => undefined);
      }
    });
    this.sweepTimer = setInterval(() => void this.sweep(Date.now()), sweepIntervalMs);
    this.sweepTimer.unref();
  }

  stop(): void {
    clearInterval(this.sweepTimer);
  }

  /** Runs the detectors' timeouts and retries what waits in the outbox; resolves when both are done. */
  async sweep(now: number): Promise<void> {
    try {
      await this.settle(this.engine.sweep(now), false);
    } catch (error) {
      this.logger.error({ err: error }, 'detection sweep failed');
    }
    if (now - this.lastPrune > PRUNE_EVERY_MS) {
      this.lastPrune = now;
      await this.alarms.pruneIdempotencyKeys().catch((error) => this.logger.warn({ err: error }, 'pruning alarm idempotency keys failed'));
    }
  }

  /** Hands what was found to the outbox and stores what waits there; never rejects. */
  private settle(found: Detections, zoneEventsStored: boolean): Promise<void> {
    this.outbox.add(found, zoneEventsStored, found.alarms as OutboxAlarm[]);
    return this.outbox.drain();
  }

  private async raiseRequested(batch: PositionBatch): Promise<void> {
    const by = { user_id: batch.principal.userId, email: batch.principal.email };
    const requests: Parameters<AlarmService['raiseAllOnce']>[0][number][] = [];
    for (const [index, pose] of batch.poses.entries()) {
      const types = [pose.danger ? 'DANGER' : undefined, pose.assistance_request ? 'ASSISTANCE_REQUEST' : undefined].filter((type) => type !== undefined);
      const record = batch.records[index]!;
      for (const type of types) {
        // Keyed by the pose: an upload resent after an ambiguous failure does not count the press twice.
        requests.push({
          idempotencyKey: `pose|${record.deviceId}|${type}|${record.timestamp}`,
          organizationId: record.organizationId,
          type: type as 'DANGER' | 'ASSISTANCE_REQUEST',
          deviceId: record.deviceId,
          userId: record.userId,
          buildingId: record.buildingId,
          floorId: record.floorId,
          x: record.x,
          y: record.y,
          lat: record.lat,
          lng: record.lng,
          details: { source: 'pose' },
          by,
        });
      }
    }
    await this.alarms.raiseAllOnce(requests);
  }

  private detect(batch: PositionBatch): void {
    for (const [index, record] of batch.records.entries()) {
      const found = this.engine.observe(record, batch.buildings[index], true);
      batch.detections.zoneEvents.push(...found.zoneEvents);
      batch.detections.alarms.push(...found.alarms);
      batch.detections.triggered.push(...found.triggered);
    }
  }

  /** Announces stored zone events and triggered event content to every gateway. */
  private async announceZoneEvents(zoneEvents: readonly ZoneEventRecord[], triggered: Detections['triggered']): Promise<void> {
    // Counted here, once stored, so a retried outbox entry is not counted twice.
    for (const event of zoneEvents) zoneEventCounters[event.type][event.zoneKind].inc();
    if (this.onStored && (zoneEvents.length > 0 || triggered.length > 0)) {
      await this.onStored(zoneEvents, triggered).catch((error) => this.logger.error({ err: error }, 'webhook enqueue of stored detections failed'));
    }
    if (zoneEvents.length > 0 || triggered.length > 0) {
      const byOrganization = new Map<string, ZoneEventsMessage>();
      for (const event of zoneEvents) {
        const message = byOrganization.get(event.organizationId) ?? { organizationId: event.organizationId, zoneEvents: [], triggered: [] };
        message.zoneEvents.push(event);
        byOrganization.set(event.organizationId, message);
      }
      for (const trigger of triggered) {
        const message = byOrganization.get(trigger.organizationId) ?? { organizationId: trigger.organizationId, zoneEvents: [], triggered: [] };
        message.triggered.push(trigger);
        byOrganization.set(trigger.organizationId, message);
      }
      for (const message of byOrganization.values()) await this.bus.publish(ZONE_EVENTS_CHANNEL, message);
    }
  }
}
