import { isOutageError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { ZoneEventRecord } from '../../shared/detection/zone-event.js';
import type { RaiseAlarm } from '../alarms/alarm-service.js';
import type { Detections } from './detection-engine.js';

/** A detector alarm, named so that storing it again is a no-op. */
export type OutboxAlarm = Omit<RaiseAlarm, 'by'> & { idempotencyKey: string };

/** What one batch or one sweep produced, and how far storing it has got. */
interface OutboxEntry {
  zoneEvents: ZoneEventRecord[];
  /** True once the zone events are committed (with their batch's positions, or by the outbox itself). */
  zoneEventsStored: boolean;
  alarms: OutboxAlarm[];
  triggered: Detections['triggered'];
  /** Failures that were not an outage: a poison entry is dropped after a few instead of blocking the rest. */
  failures: number;
}

export interface OutboxSink {
  storeZoneEvents(zoneEvents: readonly ZoneEventRecord[]): Promise<void>;
  /** Stores alarms in order, each at most once per key (a retry of a stored one changes nothing). */
  raiseAlarms(alarms: readonly OutboxAlarm[]): Promise<void>;
  /** After everything of an entry is stored: pushes to the other gateways; best effort. */
  announce(entry: Pick<OutboxEntry, 'zoneEvents' | 'triggered'>): Promise<void>;
}

const MAX_FAILURES = 5;

/**
 * Detector state advances as positions arrive, whether or not the database takes what the detectors found. So
 * what they found waits here, in order, until it is stored: an alarm condition or an enter/exit that happened
 * during an outage is stored once the database is back. Alarms carry an idempotency key, so retrying one whose
 * commit went through but whose answer was lost does not raise it twice. Drains run one at a time and stop at
 * the first failure (retried by the next sweep), which keeps the order of each device's events.
 */
export class DetectionOutbox {
  private readonly entries: OutboxEntry[] = [];
  private draining?: Promise<void>;
  private dropped = 0;

  constructor(
    private readonly sink: OutboxSink,
    private readonly logger: Logger,
    /** Entries kept at most; past it the oldest is dropped, loudly (memory is not infinite during a long outage). */
    private readonly maxEntries = 100_000,
  ) {}

  /** Entries waiting to be stored. */
  get size(): number {
    return this.entries.length;
  }

  /** Entries given up on (over the cap, or failing for a reason other than an outage). */
  get droppedEntries(): number {
    return this.dropped;
  }

  add(detections: Detections, zoneEventsStored: boolean, alarms: OutboxAlarm[]): void {
    if (detections.zoneEvents.length === 0 && alarms.length === 0 && detections.triggered.length === 0) return;
    this.entries.push({ zoneEvents: detections.zoneEvents, zoneEventsStored: zoneEventsStored || detections.zoneEvents.length === 0, alarms: [...alarms], triggered: detections.triggered, failures: 0 });
    while (this.entries.length > this.maxEntries) {
      const lost = this.entries.shift()!;
      this.dropped++;
      this.logger.error({ zoneEvents: lost.zoneEvents.length, alarms: lost.alarms.map((alarm) => alarm.idempotencyKey) }, 'detection outbox full: oldest detections dropped');
    }
  }

  /** Stores what is waiting; resolves when done or at the first failure (never rejects). */
  drain(): Promise<void> {
    // One drain at a time; a caller arriving during one also gets what it just added looked at.
    if (this.draining) return this.draining.then(() => (this.entries.length > 0 && !this.draining ? this.drain() : this.draining));
    return (this.draining = this.run().finally(() => (this.draining = undefined)));
  }

  private async run(): Promise<void> {
    while (this.entries.length > 0) {
      const entry = this.entries[0]!;
      try {
        if (!entry.zoneEventsStored) {
          await this.sink.storeZoneEvents(entry.zoneEvents);
          entry.zoneEventsStored = true;
        }
        if (entry.alarms.length > 0) {
          await this.sink.raiseAlarms(entry.alarms);
          entry.alarms = [];
        }
      } catch (error) {
        if (isOutageError(error)) {
          this.logger.warn({ err: error, waiting: this.entries.length }, 'database unavailable: detections wait in the outbox');
          return;
        }
        if (++entry.failures < MAX_FAILURES) {
          this.logger.error({ err: error, waiting: this.entries.length }, 'storing detections failed; will retry');
          return;
        }
        this.logger.error({ err: error, alarms: entry.alarms.map((alarm) => alarm.idempotencyKey) }, 'storing detections keeps failing: dropped');
        this.entries.shift();
        this.dropped++;
        continue;
      }
      this.entries.shift();
      await this.sink.announce(entry).catch((error) => this.logger.warn({ err: error }, 'announcing detections failed (they are stored)'));
    }
  }
}
