import { ForbiddenError, StorageUnavailableError, ValidationError, fieldErrors } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import { positionsAccepted, refusedPositions, uploadBatchSize, uploadToPublish } from '../../shared/metrics/metrics.js';
import type { PositionWriter } from '../../shared/positions/position-writer.js';
import { confinedUserId } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import type { BuildingRegistry, BuildingRuntime } from '../realtime/building-registry.js';
import type { DeviceDirectory } from '../realtime/device-directory.js';
import { DEFAULT_POSITIONS_MAX_AGE_MS, parsePoseFast, poseSchema, timestampProblem } from '../realtime/pose-schema.js';
import { trackingWindowStep, type TrackingWindows } from '../privacy/tracking-windows.js';
import { runPipeline, type PipelineStep } from './pipeline.js';
import type { PositionBatch } from './position-batch.js';
import type { LivePositions, PositionHandOff, RequestedAlarmRaiser } from './ports.js';

export interface PipelineDependencies {
  registry: BuildingRegistry;
  devices: DeviceDirectory;
  writer: PositionWriter;
  /** This gateway's live state, and the bus to the gateways that follow these positions (gateway/realtime). */
  live: LivePositions;
  logger: Logger;
  /** Raises the alarm buttons poses carry (DANGER, assistance requests). */
  alarms: RequestedAlarmRaiser;
  /** The owners of the positions' buildings, who run the detectors on them. */
  owners: PositionHandOff;
  /** POSITIONS_MAX_AGE_SECONDS in ms: older fixes are refused (default 7 days). */
  maxAgeMs?: number;
  /** The people's tracking windows (gateway/privacy); none: every position is kept. */
  trackingWindows?: TrackingWindows;
  /** BENCH_SKIP_STAGE: a stage the steps leave out, for a bench to measure its floor; none in production. */
  skipStage?: SkippableStage;
}

/** The steps that make each stage a bench may take away (BENCH_SKIP_STAGE). */
export const STAGE_STEPS = {
  none: [],
  store: ['persist'],
  bus: ['publish'],
  detection: ['pace-to-detection', 'hand-to-owners'],
} as const satisfies Record<string, readonly string[]>;
export type SkippableStage = keyof typeof STAGE_STEPS;

/**
 * The hot path, in order. Enrich first (validate, georeference, attach buildings and devices), then raise
 * the alarms the poses ask for, pace to detection, publish the live positions, persist, and hand the positions
 * to the owners of their buildings, who run the detectors (gateway/cluster, gateway/detection).
 *
 * An alarm button pressed on the app is part of the upload: if it cannot be stored, the upload fails and is
 * retried; it is raised before pacing, so a DANGER or assistance request never waits behind detection, and the
 * app's retry raises nothing twice (keyed by the pose). An upload refused by pacing stores no position.
 *
 * Live positions go out before the commit, so a control room sees a position as soon as it is accepted rather
 * than a group commit later; the upload's acknowledgement still waits for the commit. If the commit fails, the
 * app gets an error and sends the batch again: a live screen may have shown a position that is stored only on
 * that retry, never one that is lost after its 204. Before the 204 the stored positions are also appended to
 * their buildings' shard streams, from which the owners detect on them even if this gateway dies right after
 * (while Redis is down they wait in this gateway's memory instead, see ClusterNode.handOff); the owners store
 * and push what they find, alarms stored before pushed.
 */
export function positionSteps(deps: PipelineDependencies): PipelineStep<PositionBatch>[] {
  const steps: PipelineStep<PositionBatch>[] = [
    { name: 'validate', critical: true, run: (batch) => validate(batch, deps.maxAgeMs ?? DEFAULT_POSITIONS_MAX_AGE_MS) },
    { name: 'georeference', critical: true, run: (batch) => georeference(batch, deps.registry) },
    { name: 'refuse-invalid', critical: true, run: refuseInvalid },
    { name: 'resolve-devices', critical: true, run: (batch) => resolveDevices(batch, deps.devices) },
    trackingWindowStep(deps.trackingWindows),
    { name: 'raise-requested-alarms', critical: true, run: (batch) => deps.alarms.raise(batch) },
    { name: 'pace-to-detection', critical: true, run: (batch) => deps.owners.admit(batch.records) },
    { name: 'publish', run: (batch) => publish(batch, deps.live) },
    { name: 'persist', critical: true, run: (batch) => deps.writer.write(batch.records) },
    { name: 'hand-to-owners', run: (batch) => deps.owners.handOff(batch.records, batch.published) },
  ];
  // Left out of the list once, at boot, so the hot path itself never asks.
  const skipped: readonly string[] = STAGE_STEPS[deps.skipStage ?? 'none'];
  return skipped.length === 0 ? steps : steps.filter((step) => !skipped.includes(step.name));
}

export class PositionPipeline {
  /** `positionSteps`, in order. */
  readonly steps: readonly PipelineStep<PositionBatch>[];

  constructor(private readonly deps: PipelineDependencies) {
    this.steps = positionSteps(deps);
  }

  /** Resolves once the batch is durably stored; rejects with a 422 listing every bad item, storing nothing. */
  async process(principal: Principal, items: readonly unknown[], receivedAt = Date.now()): Promise<PositionBatch> {
    const batch: PositionBatch = { principal, items, receivedAt, poses: [], records: [], errors: [] };
    uploadBatchSize.observe(items.length);
    try {
      await runPipeline(this.steps, batch, this.deps.logger);
    } catch (error) {
      (error instanceof ValidationError
        ? refusedPositions.invalid
        : error instanceof ForbiddenError
          ? refusedPositions.forbidden
          : refusedPositions.failed
      ).inc(items.length);
      throw error;
    }
    positionsAccepted.inc(batch.records.length);
    return batch;
  }
}

function validate(batch: PositionBatch, maxAgeMs: number): void {
  const { errors, items, poses, receivedAt } = batch;
  // A confined caller (a plain user, or their key) uploads only their own positions.
  const confined = confinedUserId(batch.principal);
  for (let index = 0; index < items.length; index++) {
    const item = items[index];
    // The common well-formed pose skips zod's allocations; anything else gets the schema's verdict and messages.
    let pose = parsePoseFast(item);
    if (!pose) {
      const parsed = poseSchema.safeParse(item);
      if (!parsed.success) {
        errors.push(...fieldErrors(parsed.error, `poses.${index}`));
        continue;
      }
      pose = parsed.data;
    }
    // Against the batch's receipt time, so one upload is judged by one clock.
    const late = timestampProblem(pose.timestamp, receivedAt, maxAgeMs);
    if (late) {
      errors.push({ field: `poses.${index}.timestamp`, message: late });
      continue;
    }
    if (confined !== undefined && pose.user_id !== undefined && pose.user_id !== confined) {
      errors.push({ field: `poses.${index}.user_id`, message: 'you may only upload your own positions' });
    }
    poses[index] = pose;
  }
}

/** Every bad pose is listed by index, from the schema and from enrichment alike; nothing of the batch is kept. */
function refuseInvalid(batch: PositionBatch): void {
  const { errors } = batch;
  if (errors.length === 0) return;
  const poses = new Set(errors.map((error) => error.field.split('.')[1])).size;
  throw new ValidationError(errors.slice(0, 200), `${poses} pose(s) are invalid; none was stored`);
}

async function georeference(batch: PositionBatch, registry: BuildingRegistry): Promise<void> {
  const { organizationId } = batch.principal;
  const { errors, poses, records, receivedAt } = batch;
  let lastBuildingId: number | undefined;
  let lastRuntime: BuildingRuntime | undefined;
  for (let index = 0; index < poses.length; index++) {
    const pose = poses[index];
    if (!pose) continue; // already reported by the schema
    const indoor = pose.floor_id !== undefined;
    let runtime: BuildingRuntime | undefined;
    if (pose.building_id === undefined) runtime = undefined;
    else if (pose.building_id === lastBuildingId)
      runtime = lastRuntime; // a batch is mostly one building: one lookup
    else {
      // The loaded runtime when there is one (no await per pose on the hot path); a miss loads it.
      const loaded = registry.peek(pose.building_id);
      runtime = loaded?.organizationId === organizationId ? loaded : await registry.get(organizationId, pose.building_id);
      lastBuildingId = pose.building_id;
      lastRuntime = runtime;
    }
    if (pose.building_id !== undefined && !runtime) {
      errors.push({ field: `poses.${index}.building_id`, message: 'no such building in your organization' });
      continue;
    }
    let x: number | null = null;
    let y: number | null = null;
    let lat: number;
    let lng: number;
    if (indoor) {
      const floor = runtime!.floors.get(pose.floor_id!);
      if (!floor) {
        errors.push({ field: `poses.${index}.floor_id`, message: `no floor ${pose.floor_id} in building ${pose.building_id}` });
        continue;
      }
      x = pose.x!;
      y = pose.y!;
      ({ lat, lng } = runtime!.transform.toGeo({ x, y }));
      // A building near a pole (or a transform gone wrong) can still turn bounded x/y into no place on Earth.
      if (!(Math.abs(lat) <= 90 && Math.abs(lng) <= 180)) {
        errors.push({ field: `poses.${index}.x`, message: 'x and y derive no valid latitude/longitude on this building' });
        continue;
      }
    } else {
      lat = pose.lat!;
      lng = pose.lng!;
      runtime ??= await registry.buildingAt(organizationId, { lat, lng });
    }
    records[index] = {
      organizationId,
      deviceId: pose.device_id,
      userId: pose.user_id ?? null,
      buildingId: runtime?.id ?? null,
      floorId: indoor ? pose.floor_id! : null,
      indoor,
      x,
      y,
      lat,
      lng,
      yaw: pose.yaw,
      accuracy: pose.accuracy ?? null,
      timestamp: pose.timestamp,
      receivedAt,
    };
  }
}

/**
 * Registers unknown devices and fills each record's user: the pose's, else the device's owner, else a plain
 * user's own. A confined caller uploads only for devices unassigned or assigned to themselves, whatever the
 * pose's `user_id` says: otherwise anyone could move a colleague's device, fake its zone events, mute its
 * dead-man alarm. A device without a directory entry has an unknown owner, not none: the upload fails (503).
 */
async function resolveDevices(batch: PositionBatch, directory: DeviceDirectory): Promise<void> {
  const { records } = batch;
  const confined = confinedUserId(batch.principal);
  const identifiers = new Array<string>(records.length);
  for (let index = 0; index < records.length; index++) identifiers[index] = records[index]!.deviceId;
  const devices = await directory.resolve(batch.principal.organizationId, identifiers);
  for (let index = 0; index < records.length; index++) {
    const record = records[index]!;
    const device = devices[index];
    if (!device)
      throw new StorageUnavailableError(
        `poses.${index}: the owner of device ${JSON.stringify(record.deviceId)} could not be read; retry later`,
      );
    const owner = device.userId;
    if (confined !== undefined && owner !== null && owner !== confined) {
      throw new ForbiddenError(`poses.${index}: device ${record.deviceId} is assigned to another user`);
    }
    record.userId ??= owner ?? confined ?? null;
  }
}

async function publish(batch: PositionBatch, live: LivePositions): Promise<void> {
  batch.published = await live.publish(batch.principal.organizationId, batch.records);
  uploadToPublish.observe((Date.now() - batch.receivedAt) / 1000);
}
