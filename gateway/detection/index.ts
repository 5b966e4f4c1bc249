import type { Bus } from '../bus-channels.js';
import type { Config } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import type { PositionWriter } from '../../shared/positions/position-writer.js';
import type { Storage } from '../../shared/storage/index.js';
import type { AlarmService } from '../alarms/alarm-service.js';
import type { BuildingRegistry } from '../realtime/building-registry.js';
import { StorageDeadLetterStore } from './dead-letter-store.js';
import { DeadmanEvidence } from './deadman-evidence.js';
import { DetectionEngine } from './detection-engine.js';
import { DetectionOutbox } from './detection-outbox.js';
import { DetectionShards, type LatestPositions } from './detection-shards.js';
import { DetectionSink, type DetectionWebhooks } from './detection-sink.js';
import { DetectorStateLoader } from './detector-state-loader.js';
import { LateDetection } from './late-detection.js';
import { LateQueue } from './late-queue.js';
import { OwnerDetection } from './owner-detection.js';
import { restAfterWork } from '../../shared/pacing.js';

export interface DetectionDependencies {
  config: Config;
  storage: Storage;
  registry: BuildingRegistry;
  writer: PositionWriter;
  bus: Bus;
  logger: Logger;
  alarms: AlarmService;
  webhooks: DetectionWebhooks;
  /** The live state: the detectors share its object for a position it holds (detection-shards.ts). */
  live: LatestPositions;
}

/** Detection as a gateway runs it; `shards` is what the cluster node hands the shards it owns. */
export interface Detection {
  engine: DetectionEngine;
  /** What the detectors found, until it is stored. */
  outbox: DetectionOutbox;
  shards: DetectionShards;
}

/**
 * Assembles detection: the engine (detector state per device), the outbox and the sink it stores into, and the
 * shard handler through which the owner of a building rebuilds its state and detects on its positions. The
 * sweep is built apart (detection-sweep.ts): it needs the cluster node's word on which buildings are owned here.
 */
export function createDetection(deps: DetectionDependencies): Detection {
  const { config, storage, registry, writer, bus, logger, alarms, webhooks, live } = deps;
  // Silent devices are forgotten once no detector could still need them.
  const forgetAfterMs = Math.max(config.LIVE_POSITION_TTL_SECONDS, 3600) * 1000;
  const engine = new DetectionEngine(registry, forgetAfterMs, config.DETECTION_MAX_TRACKED_DEVICES);
  // Dead letters outlive a restart; the owners of their buildings retry them.
  const sink = new DetectionSink({ writer, alarms, bus, logger, webhooks });
  const outbox = new DetectionOutbox(sink, logger, config.DETECTION_OUTBOX_MAX, Date.now, new StorageDeadLetterStore(storage));
  // A building arriving here (at boot, or from a gateway that left) gets its detector state rebuilt from storage.
  const lookback = { lookbackMs: engine.forgetAfterMs, maxAgeMs: config.POSITIONS_MAX_AGE_SECONDS * 1000 };
  const loader = new DetectorStateLoader(storage, engine, registry, logger, lookback);
  // Fixes arriving after newer ones of their device are re-detected in event time (late-detection.ts).
  const late = new LateDetection({
    storage,
    engine,
    registry,
    outbox,
    webhooks,
    announce: (found) => sink.announce(found),
    raisesOf: (organizationId, alarmIds) => alarms.raisesOf(organizationId, alarmIds),
    unfoldAlarm: (organizationId, alarmId, keys, shown) => alarms.unfold(organizationId, alarmId, keys, shown),
    supersedeAlarm: (organizationId, alarmId, keys) => alarms.supersede(organizationId, alarmId, keys),
    logger,
    reorderWindowMs: config.DETECTION_REORDER_WINDOW_SECONDS * 1000,
  });
  // Silence alarms get the late fixes that cover their silence as evidence (deadman-evidence.ts).
  const evidence = new DeadmanEvidence({
    storage,
    engine,
    registry,
    alarms,
    logger,
    reorderWindowMs: config.DETECTION_REORDER_WINDOW_SECONDS * 1000,
    maxAgeMs: config.POSITIONS_MAX_AGE_SECONDS * 1000,
  });
  // Replayed beside the on-time series, per organization (late-queue.ts).
  // On embedded storage each replay's statements run in this thread: replays yield to ingest (shared/pacing.ts).
  const pace = storage.kind === 'embedded' ? (took: number, minShare?: number) => restAfterWork(took, minShare) : undefined;
  const lateQueue = new LateQueue(late, engine, logger, undefined, pace);
  const detection = new OwnerDetection(engine, registry, outbox, {
    late: { screen: (records) => late.screen(records), queue: lateQueue },
    evidence,
  });
  const shards = new DetectionShards({ detection, loader, engine, live, storage, shards: config.CLUSTER_SHARDS, logger });
  return { engine, outbox, shards };
}
