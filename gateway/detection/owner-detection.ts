import { detectionCpuSeconds, detectionPositions } from '../../shared/metrics/metrics.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { BuildingRegistry, BuildingRuntime } from '../realtime/building-registry.js';
import type { DetectionEngine } from './detection-engine.js';
import type { DetectionOutbox } from './detection-outbox.js';
import type { LateDetection } from './late-detection.js';
import { emptyDetections } from './detections.js';

/**
 * Longest stretch the detectors run before uploads and live frames get the event loop back: one read of a shard
 * holds up to 16 uploads (1,600 positions of 100), about 40 ms of detectors at 1,000 fences, which every upload
 * arriving meanwhile (and its live frame) waited out. Time-based, so it holds at any fence count.
 */
const DETECT_SLICE_MS = 2;

/**
 * Detection on the owner of the positions' buildings (fed by gateway/detection/detection-shards.ts from the shard
 * streams): the detectors run over the positions in order, and what they find goes to the outbox, which stores
 * it. Output is fenced by ownership: once a building's lease is lost, nothing more is emitted for it here.
 */
export class OwnerDetection {
  constructor(
    private readonly engine: DetectionEngine,
    private readonly registry: BuildingRegistry,
    private readonly outbox: DetectionOutbox,
    /** Where fixes older than their device's newest detected one go (none: they change nothing, as before). */
    private readonly late?: Pick<LateDetection, 'run'>,
  ) {}

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
    // Fixes older than their device's newest one run: the late path's, once the on-time ones are detected.
    const late: PositionRecord[] = [];
    let cpu = process.cpuUsage();
    let sliceStart = 0;
    let sliceEnds = performance.now() + DETECT_SLICE_MS;
    for (let index = 0; index < records.length; index++) {
      this.engine.observe(records[index]!, runtimes[index], found, late);
      if ((index & 15) !== 15 || index + 1 === records.length || performance.now() < sliceEnds) continue;
      // The slice's output goes to the outbox before anything else (a sweep) can run, so each device's stays in order.
      countDetectionCpu(cpu);
      detectionPositions.inc(index + 1 - sliceStart);
      if (!holds()) return false;
      this.outbox.add(found, false);
      found = emptyDetections();
      await new Promise((resolve) => setImmediate(resolve));
      cpu = process.cpuUsage();
      sliceStart = index + 1;
      sliceEnds = performance.now() + DETECT_SLICE_MS;
    }
    countDetectionCpu(cpu);
    detectionPositions.inc(records.length - sliceStart);
    if (!holds()) return false;
    this.outbox.add(found, false);
    if (late.length > 0 && this.late) return this.late.run(late, holds);
    return true;
  }

  /** Stores what waits in the outbox; resolves to true once nothing does. */
  async stored(): Promise<boolean> {
    await this.outbox.drain();
    return this.outbox.size === 0;
  }
}

/** Adds the CPU time spent since `since` (a `process.cpuUsage()` reading) to the detection counter. */
export function countDetectionCpu(since: NodeJS.CpuUsage): void {
  const spent = process.cpuUsage(since);
  detectionCpuSeconds.inc((spent.user + spent.system) / 1e6);
}
