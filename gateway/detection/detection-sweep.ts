import type { Logger } from '../../shared/logger.js';
import type { AlarmEscalation } from '../alarms/alarm-escalation.js';
import type { DetectionEngine } from './detection-engine.js';
import type { DetectionOutbox } from './detection-outbox.js';
import type { Detections } from './detections.js';
import { countDetectionCpu } from './owner-detection.js';

/** Whether this gateway owns a building's detection now (its shard's lease is held); `null`: no building. */
export type OwnsBuilding = (buildingId: number | null) => boolean;

export interface DetectionSweepDependencies {
  engine: DetectionEngine;
  outbox: DetectionOutbox;
  /** Fences the sweep's output: only the buildings this gateway owns at that moment emit (gateway/cluster). */
  owns: OwnsBuilding;
  logger: Logger;
  /** Escalates unconfirmed critical alarms, on the sweep's clock. */
  escalation?: AlarmEscalation;
}

/**
 * The once-a-second sweep: the detectors' timeouts (pending debounces, stays running over, dead-man silence),
 * retries of what waits in the outbox (dead letters once due), then escalation of unconfirmed critical alarms.
 */
export class DetectionSweep {
  private timer?: NodeJS.Timeout;

  constructor(private readonly deps: DetectionSweepDependencies) {}

  start(intervalMs = 1000): void {
    this.timer = setInterval(() => void this.run(Date.now()), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One sweep at `now`; resolves when all of it is done (never rejects). */
  async run(now: number): Promise<void> {
    const { engine, outbox, owns, logger, escalation } = this.deps;
    try {
      const cpu = process.cpuUsage();
      const found = engine.sweep(now);
      countDetectionCpu(cpu);
      // Between losing a lease and forgetting its buildings, a sweep must not emit for them.
      const kept: Detections = {
        zoneEvents: found.zoneEvents.filter((event) => owns(event.buildingId)),
        alarms: found.alarms.filter((alarm) => owns(alarm.buildingId ?? null)),
        triggered: found.triggered.filter((trigger) => owns(trigger.event.buildingId)),
      };
      outbox.add(kept, false);
      await outbox.drain();
      await outbox.retryDeadLetters(owns);
    } catch (error) {
      logger.error({ err: error }, 'detection sweep failed');
    }
    await escalation?.sweep(now, owns).catch((error) => logger.error({ err: error }, 'alarm escalation failed'));
  }
}
