import type { Bus } from '../bus-channels.js';
import type { Logger } from '../../shared/logger.js';
import { detectionCpuSeconds, detectionPositions, zoneEventCounters } from '../../shared/metrics/metrics.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { PositionWriter } from '../../shared/positions/position-writer.js';
import type { EncodedPositions } from '../../shared/positions/positions-message.js';
import type { AlarmEscalation } from '../alarms/alarm-escalation.js';
import type { AlarmService } from '../alarms/alarm-service.js';
import type { DetectionSteps, PositionBatch } from '../pipeline/position-pipeline.js';
import type { BuildingRegistry, BuildingRuntime } from '../realtime/building-registry.js';
import { AlarmButton, type ButtonType, type FoldedPress } from './alarm-button.js';
import { emptyDetections, type DetectionEngine, type Detections, type ZoneEventRecord } from './detection-engine.js';
import type { DeadLetterStore } from './dead-letter-store.js';
import { DetectionOutbox, type OutboxAlarm } from './detection-outbox.js';
import type { ZoneEventsMessage } from './zone-events-message.js';

const PRUNE_EVERY_MS = 3600_000;
/** Zone events per bus message (a few hundred KB packed); subscribers get one frame per message and topic. */
export const MAX_EVENTS_PER_MESSAGE = 2000;
/**
 * Longest stretch the detectors run before uploads and live frames get the event loop back: one read of a shard
 * holds up to 16 uploads (1,600 positions of 100), about 40 ms of detectors at 1,000 fences, which every upload
 * arriving meanwhile (and its live frame) waited out. Time-based, so it holds at any fence count.
 */
const DETECT_SLICE_MS = 2;

/** What webhooks need of detection (gateway/webhooks/webhook-service.ts). */
export interface DetectionWebhooks {
  /** Stores zone events, with the deliveries they owe in the same transaction; `groupCommit` when they owe none. */
  storeZoneEvents(zoneEvents: readonly ZoneEventRecord[], groupCommit: () => Promise<void>): Promise<void>;
  /** Told of zone events and triggers once stored and announced. */
  detectionsStored(zoneEvents: readonly ZoneEventRecord[], triggered: Detections['triggered']): Promise<void>;
}

/** Whether this gateway owns a building's detection now (its shard's lease is held); `null`: no building. */
export type OwnsBuilding = (buildingId: number | null) => boolean;

/** Where accepted positions go for detection: to the owners of their buildings (gateway/cluster). */
export interface PositionHandOff {
  /** Before storing: waits while the owners of these positions are too far behind, or refuses (503). */
  admit(records: readonly PositionRecord[]): Promise<void> | undefined;
  /** `published`: the same records as packed for the bus, whose bytes the hand-off may reuse. */
  handOff(records: readonly PositionRecord[], published?: EncodedPositions): Promise<void>;
}

/**
 * Glue between the pure detectors and the rest: the pipeline's steps, detection of the positions of the
 * buildings this gateway owns (`detect`, fed by gateway/cluster from the shard streams), the once-a-second
 * sweep, and storage of what was found (zone events for reports, alarms through the alarm service), announced
 * on the bus once stored (gateway/ws/live-feeds.ts pushes the announcements to sockets).
 *
 * What the detectors produce goes through an outbox that retries until it is stored: nothing found during a
 * database outage is lost, and idempotency keys keep a retried alarm from counting twice. Its lanes are per
 * organization, so one tenant's unstorable detections never hold back another's. Output is fenced by
 * ownership: once a building's lease is lost, nothing more is emitted for it here.
 */
export class DetectionService {
  private sweepTimer?: NodeJS.Timeout;
  readonly outbox: DetectionOutbox;
  private lastPrune = 0;

  constructor(
    private readonly engine: DetectionEngine,
    private readonly alarms: AlarmService,
    private readonly registry: BuildingRegistry,
    /** Zone events go through the group commit. */
    private readonly writer: PositionWriter,
    private readonly bus: Bus,
    private readonly logger: Logger,
    outboxMax = 100_000,
    /** Webhooks, on this node only: zone events are stored with the deliveries they owe; triggers enqueued once announced. */
    private readonly webhooks?: DetectionWebhooks,
    /** Debounce and budget of the alarm buttons poses carry. */
    private readonly button = new AlarmButton(10_000, 120),
    /** Escalates unconfirmed critical alarms, on the sweep's clock. */
    private readonly escalation?: AlarmEscalation,
    /** Where the outbox's dead letters outlive a restart. */
    deadLetters?: DeadLetterStore,
  ) {
    this.outbox = new DetectionOutbox(
      {
        storeZoneEvents: (zoneEvents) => (this.webhooks ? this.webhooks.storeZoneEvents(zoneEvents, () => this.writer.write([], zoneEvents)) : this.writer.write([], zoneEvents)),
        raiseAlarm: async (alarm) => void (await this.alarms.raiseAllOnce([{ ...alarm, by: 'system' as const }])),
        announce: (entry) => this.announceZoneEvents(entry.zoneEvents, entry.triggered),
      },
      logger,
      outboxMax,
      Date.now,
      deadLetters,
    );
  }

  /** Devices whose detector state is held in memory. */
  get trackedDevices(): number {
    return this.engine.trackedDevices;
  }

  /** The steps the position pipeline runs around persistence. */
  steps(owners: PositionHandOff): DetectionSteps {
    return {
      // An alarm button pressed on the app is part of the upload: if it cannot be stored, the upload fails and is retried.
      // Then paced by detection: an upload refused for it stores no position. A DANGER or assistance request never
      // waits behind detection: it is raised first, and the app's retry raises nothing twice (keyed by the pose).
      beforePersist: [
        { name: 'raise-requested-alarms', critical: true, run: (batch) => this.raiseRequested(batch) },
        { name: 'pace-to-detection', critical: true, run: (batch) => owners.admit(batch.records) },
      ],
      // Once stored, positions go to their buildings' owners, who detect on them (never rejects: see handOff).
      afterPersist: [{ name: 'hand-to-owners', run: (batch) => owners.handOff(batch.records, batch.published) }],
    };
  }

  /** Sweeps every `sweepIntervalMs`, emitting only for the buildings this gateway owns at that moment. */
  start(owns: OwnsBuilding, sweepIntervalMs = 1000): void {
    this.sweepTimer = setInterval(() => void this.sweep(Date.now(), owns), sweepIntervalMs);
    this.sweepTimer.unref();
  }

  /**
   * Runs the detectors over positions of buildings this gateway owns, in order, and queues what they found for
   * storage (`stored()` then stores it, and the positions may be acknowledged once it says so); false when
   * `holds()` turned false (ownership lost: nothing is emitted). An owner detects its next read while the last
   * one's detections are being stored.
   */
  async detect(records: readonly PositionRecord[], holds: () => boolean): Promise<boolean> {
    const runtimes: (BuildingRuntime | undefined)[] = [];
    for (const record of records) {
      const id = record.buildingId;
      runtimes.push(id === null ? undefined : (this.registry.peek(id) ?? (await this.registry.get(record.organizationId, id))));
    }
    let found = emptyDetections();
    let cpu = process.cpuUsage();
    let sliceStart = 0;
    let sliceEnds = performance.now() + DETECT_SLICE_MS;
    for (let index = 0; index < records.length; index++) {
      this.engine.observe(records[index]!, runtimes[index], found);
      if ((index & 15) !== 15 || index + 1 === records.length || performance.now() < sliceEnds) continue;
      // The slice's output goes to the outbox before anything else (a sweep) can run, so each device's stays in order.
      countCpu(cpu);
      detectionPositions.inc(index + 1 - sliceStart);
      if (!holds()) return false;
      this.outbox.add(found, false, found.alarms as OutboxAlarm[]);
      found = emptyDetections();
      await new Promise((resolve) => setImmediate(resolve));
      cpu = process.cpuUsage();
      sliceStart = index + 1;
      sliceEnds = performance.now() + DETECT_SLICE_MS;
    }
    countCpu(cpu);
    detectionPositions.inc(records.length - sliceStart);
    if (!holds()) return false;
    this.outbox.add(found, false, found.alarms as OutboxAlarm[]);
    return true;
  }

  /** Stores what waits in the outbox; resolves to true once nothing does. */
  async stored(): Promise<boolean> {
    await this.outbox.drain();
    return this.outbox.size === 0;
  }

  stop(): void {
    clearInterval(this.sweepTimer);
  }

  /** Runs the detectors' timeouts, retries what waits in the outbox (dead letters once due) and escalates due alarms; resolves when all are done. */
  async sweep(now: number, owns: OwnsBuilding): Promise<void> {
    try {
      const cpu = process.cpuUsage();
      const found = this.engine.sweep(now);
      countCpu(cpu);
      // Between losing a lease and forgetting its buildings, a sweep must not emit for them.
      const kept: Detections = {
        zoneEvents: found.zoneEvents.filter((event) => owns(event.buildingId)),
        alarms: found.alarms.filter((alarm) => owns(alarm.buildingId ?? null)),
        triggered: found.triggered.filter((trigger) => owns(trigger.event.buildingId)),
      };
      this.outbox.add(kept, false, kept.alarms as OutboxAlarm[]);
      await this.outbox.drain();
      await this.outbox.retryDeadLetters(owns);
    } catch (error) {
      this.logger.error({ err: error }, 'detection sweep failed');
    }
    await this.escalation?.sweep(now, owns).catch((error) => this.logger.error({ err: error }, 'alarm escalation failed'));
    if (now - this.lastPrune > PRUNE_EVERY_MS) {
      this.lastPrune = now;
      await this.alarms.pruneIdempotencyKeys().catch((error) => this.logger.warn({ err: error }, 'pruning alarm idempotency keys failed'));
    }
  }

  /**
   * The alarm buttons of a batch: each device's presses of each button fold into one raise counting them all (one
   * alarm write, whatever the number of poses), then `button` decides which raise an alarm event and which, repeats
   * within its debounce, only add occurrences; past the caller's budget the upload is refused before any write.
   */
  private async raiseRequested(batch: PositionBatch): Promise<void> {
    const by = { user_id: batch.principal.userId, email: batch.principal.email };
    const folded = new Map<string, FoldedPress & { first: number; last: PositionRecord }>();
    for (const [index, pose] of batch.poses.entries()) {
      const types: ButtonType[] = [];
      if (pose.danger) types.push('DANGER');
      if (pose.assistance_request) types.push('ASSISTANCE_REQUEST');
      const record = batch.records[index]!;
      for (const type of types) {
        const key = `${record.deviceId}|${type}`;
        const press = folded.get(key);
        if (!press) folded.set(key, { organizationId: record.organizationId, deviceId: record.deviceId, type, presses: 1, first: record.timestamp, last: record });
        else {
          press.presses++;
          press.first = Math.min(press.first, record.timestamp);
          if (record.timestamp >= press.last.timestamp) press.last = record;
        }
      }
    }
    if (folded.size === 0) return;
    const credential = batch.principal.apiKeyId ? `key:${batch.principal.apiKeyId}` : `user:${batch.principal.userId}`;
    const { raise, count } = this.button.plan(credential, [...folded.values()], batch.receivedAt);
    const request = ({ organizationId, deviceId, type, presses, first, last }: FoldedPress & { first: number; last: PositionRecord }) => ({
      // Keyed by the presses: an upload resent after an ambiguous failure does not count them twice.
      idempotencyKey: `pose|${deviceId}|${type}|${first}|${last.timestamp}|${presses}`,
      organizationId,
      type,
      deviceId,
      occurrences: presses,
      // The place of the latest press.
      userId: last.userId,
      buildingId: last.buildingId,
      floorId: last.floorId,
      x: last.x,
      y: last.y,
      lat: last.lat,
      lng: last.lng,
      details: { source: 'pose' },
      by,
    });
    const closedMeanwhile = await this.alarms.countRepeats(count.map(request));
    await this.alarms.raiseAllOnce([...raise.map(request), ...closedMeanwhile]);
  }

  /** Announces stored zone events and triggered event content to every gateway. */
  private async announceZoneEvents(zoneEvents: readonly ZoneEventRecord[], triggered: Detections['triggered']): Promise<void> {
    // Counted here, once stored, so a retried outbox entry is not counted twice.
    for (const event of zoneEvents) zoneEventCounters[event.type][event.zoneKind].inc();
    if (this.webhooks && (zoneEvents.length > 0 || triggered.length > 0)) {
      await this.webhooks.detectionsStored(zoneEvents, triggered).catch((error) => this.logger.error({ err: error }, 'webhook enqueue of stored detections failed'));
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
      for (const message of byOrganization.values()) {
        // Bounded messages: one read of a shard can find a hundred thousand events, and a message that size
        // overruns Redis's output buffer for pub/sub clients, which then drops the subscriber (and its messages).
        for (let start = 0; start === 0 || start < message.zoneEvents.length; start += MAX_EVENTS_PER_MESSAGE) {
          const zoneEventsPart = message.zoneEvents.slice(start, start + MAX_EVENTS_PER_MESSAGE);
          await this.bus.publish('zone-events', { organizationId: message.organizationId, zoneEvents: zoneEventsPart, triggered: start === 0 ? message.triggered : [] });
        }
      }
    }
  }
}

/** Adds the CPU time spent since `since` (a `process.cpuUsage()` reading) to the detection counter. */
function countCpu(since: NodeJS.CpuUsage): void {
  const spent = process.cpuUsage(since);
  detectionCpuSeconds.inc((spent.user + spent.system) / 1e6);
}
