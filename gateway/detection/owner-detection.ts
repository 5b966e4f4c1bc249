import { detectionCpuSeconds, detectionPositions } from '../../shared/metrics/metrics.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { BuildingRegistry, BuildingRuntime } from '../realtime/building-registry.js';
import type { DetectionEngine } from './detection-engine.js';
import type { DetectionOutbox } from './detection-outbox.js';
import type { DeadmanEvidence } from './deadman-evidence.js';
import type { LateDetection } from './late-detection.js';
import type { LateQueue } from './late-queue.js';
import { emptyDetections } from './detections.js';

/**
 * Longest stretch the detectors run before uploads and live frames get the event loop back: one read of a shard
 * holds up to 16 uploads (1,600 positions of 100), about 40 ms of detectors at 1,000 fences, which every upload
 * arriving meanwhile (and its live frame) waited out. Time-based, so it holds at any fence count.
 */
const DETECT_SLICE_MS = 2;
/**
 * Positions between two looks at the clock, at most: a light building's position costs a few µs, so the clock is
 * read every 16 of them, as before. A costly one (a position of a building of 200 fences of 1,000 vertices that
 * fills its grid cells: several ms) shortens the stride down to one, so a slice overruns by one position at most
 * instead of 16 of them (a quarter of a second, which another tenant's uploads waited out).
 */
const MAX_STRIDE = 16;

/**
 * Detection on the owner of the positions' buildings (fed by gateway/detection/detection-shards.ts from the shard
 * streams): the detectors run over the positions in order, and what they find goes to the outbox, which stores
 * it. Output is fenced by ownership: once a building's lease is lost, nothing more is emitted for it here.
 *
 * Fair between organizations: each organization's positions of a read run as their own series of slices, and
 * series run at once (as do the reads of different shards, gateway/cluster/shard-reader.ts) take turns slice by
 * slice, each yielding the event loop in between. So a tenant's costly buildings hold another tenant's positions
 * back by about one slice each turn, never by all of theirs; a device's positions stay in order, as a device
 * belongs to one organization.
 */
export class OwnerDetection {
  /** `clock`: milliseconds, as `performance.now()` (tests give one that a costly position moves on). */
  constructor(
    private readonly engine: DetectionEngine,
    private readonly registry: BuildingRegistry,
    private readonly outbox: DetectionOutbox,
    /**
     * What a read's fixes go through once its on-time ones are detected: `late` screens the fixes older than their
     * device's newest detected one (none: they change nothing) and queues those that may change something for a
     * replay beside this series, `evidence` every fix, for the silence alarms the ones that reached us late cover.
     */
    private readonly after: { late?: { screen: LateDetection['screen']; queue: LateQueue }; evidence?: Pick<DeadmanEvidence, 'run'> } = {},
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /**
   * Runs the detectors over positions of buildings this gateway owns, in order per organization, and queues what
   * they found for storage (`stored()` then stores it, and the positions may be acknowledged once it says so);
   * false when `holds()` turned false (ownership lost: nothing is emitted). An owner detects its next read while
   * the last one's detections are being stored.
   */
  async detect(records: readonly PositionRecord[], holds: () => boolean): Promise<boolean> {
    const organizations = byOrganization(records);
    if (organizations.length === 1) return this.detectSeries(organizations[0]!, holds);
    const results = await Promise.all(organizations.map((series) => this.detectSeries(series, holds)));
    return results.every(Boolean);
  }

  /** One organization's positions, in order, in slices of about DETECT_SLICE_MS that yield the event loop. */
  private async detectSeries(records: readonly PositionRecord[], holds: () => boolean): Promise<boolean> {
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
    let checkedAt = this.clock();
    let sliceEnds = checkedAt + DETECT_SLICE_MS;
    // The first look comes after one position: a costly building is known before it has held the loop for 16.
    let stride = 1;
    let sinceCheck = 0;
    for (let index = 0; index < records.length; index++) {
      this.engine.observe(records[index]!, runtimes[index], found, late);
      if (++sinceCheck < stride || index + 1 === records.length) continue;
      const now = this.clock();
      // As many positions as a quarter of a slice held at the last pace: a costly position is followed by a look.
      const perPosition = (now - checkedAt) / sinceCheck;
      stride = perPosition > 0 ? Math.max(1, Math.min(MAX_STRIDE, Math.floor(DETECT_SLICE_MS / 4 / perPosition))) : MAX_STRIDE;
      sinceCheck = 0;
      checkedAt = now;
      if (now < sliceEnds) continue;
      // The slice's output goes to the outbox before anything else (a sweep) can run, so each device's stays in order.
      countDetectionCpu(cpu);
      detectionPositions.inc(index + 1 - sliceStart);
      if (!holds()) return false;
      this.outbox.add(found, false);
      found = emptyDetections();
      await new Promise((resolve) => setImmediate(resolve));
      cpu = process.cpuUsage();
      sliceStart = index + 1;
      checkedAt = this.clock();
      sliceEnds = checkedAt + DETECT_SLICE_MS;
    }
    countDetectionCpu(cpu);
    detectionPositions.inc(records.length - sliceStart);
    if (!holds()) return false;
    this.outbox.add(found, false);
    // Those that may change something are replayed beside this series (late-queue.ts), not in it.
    if (late.length > 0 && this.after.late) {
      const replay = await this.after.late.screen(late);
      if (!holds()) return false;
      this.after.late.queue.add(records[0]!.organizationId, replay, holds);
    }
    await this.after.evidence?.run(records);
    return holds();
  }

  /**
   * Stores what waits in the outbox, or what waits of `organizations`, once the late fixes queued before are
   * replayed; resolves to true once nothing (of theirs) does. Asked per organization, another organization's
   * detections still coming in do not hold the answer back.
   */
  async stored(organizations?: ReadonlySet<string>): Promise<boolean> {
    // Late fixes first: their replays add to the outbox.
    const replayed = (await this.after.late?.queue.replayed(organizations)) ?? true;
    await this.outbox.drain(organizations);
    if (!replayed) return false;
    return (organizations ? this.outbox.sizeOf(organizations) : this.outbox.size) === 0;
  }
}

/** Adds the CPU time spent since `since` (a `process.cpuUsage()` reading) to the detection counter. */
export function countDetectionCpu(since: NodeJS.CpuUsage): void {
  const spent = process.cpuUsage(since);
  detectionCpuSeconds.inc((spent.user + spent.system) / 1e6);
}

/** The positions of each organization, in their order (the records themselves when there is one organization). */
function byOrganization(records: readonly PositionRecord[]): (readonly PositionRecord[])[] {
  const first = records[0]?.organizationId;
  if (records.every((record) => record.organizationId === first)) return [records];
  const series = new Map<string, PositionRecord[]>();
  for (const record of records) {
    const list = series.get(record.organizationId);
    if (list) list.push(record);
    else series.set(record.organizationId, [record]);
  }
  return [...series.values()];
}
