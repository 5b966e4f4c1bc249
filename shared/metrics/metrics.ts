import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { ALARM_TYPES, type AlarmType } from '../detection/alarm-states.js';

/**
 * Every metric of the product, in one place, on one registry per process (served by metrics-server.ts on
 * METRICS_PORT). The hot path only increments: by batch counts, never per position, through label children
 * bound here once. Gauges of things that already keep their own count (sockets, queues, caches, the database
 * pool) are read at scrape time from the sources a gateway or worker registers (`registerSources`), so they
 * cost nothing between scrapes.
 */
export const registry = new Registry();

const PREFIX = 'floorcast_';
/** Poses per upload: one pose from a phone, thousands from a backfill. */
const BATCH_BUCKETS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000];
/** Seconds, 0.5 ms to 10 s: a commit or a publish is a few ms when healthy, seconds during an outage. */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Seconds, 10 ms to 10 min: reports. */
const JOB_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

// --- Ingest (gateway/pipeline) ------------------------------------------------------------------------------

export const positionsAccepted = new Counter({
  name: `${PREFIX}positions_accepted_total`,
  help: 'Poses stored (counted per pose, after the commit).',
  registers: [registry],
});
const positionsRefused = new Counter({
  name: `${PREFIX}positions_refused_total`,
  help: 'Poses of refused uploads (the whole batch): invalid (422), forbidden (403) or failed (not stored, e.g. the database is down).',
  labelNames: ['reason'] as const,
  registers: [registry],
});
export const refusedPositions = {
  invalid: positionsRefused.labels('invalid'),
  forbidden: positionsRefused.labels('forbidden'),
  failed: positionsRefused.labels('failed'),
};
export const positionsOutsideWindow = new Counter({
  name: `${PREFIX}positions_outside_tracking_window_total`,
  help: 'Poses acknowledged but dropped (not stored, pushed or detected): taken outside their person’s tracking window.',
  registers: [registry],
});
export const uploadBatchSize = new Histogram({
  name: `${PREFIX}upload_batch_poses`,
  help: 'Poses per upload (HTTP or WebSocket), accepted or not.',
  buckets: BATCH_BUCKETS,
  registers: [registry],
});
export const uploadToPublish = new Histogram({
  name: `${PREFIX}upload_to_publish_seconds`,
  help: 'From receipt of an upload to its positions published on the bus (live screens see them then).',
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

// --- Persistence (shared/positions/position-writer.ts) -------------------------------------------------------

export const groupCommitSeconds = new Histogram({
  name: `${PREFIX}group_commit_seconds`,
  help: 'Duration of one group commit (positions and zone events of every upload that shares it).',
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});
export const groupCommitRows = new Histogram({
  name: `${PREFIX}group_commit_rows`,
  help: 'Rows (positions and zone events) per group commit.',
  buckets: BATCH_BUCKETS,
  registers: [registry],
});

// --- Detection and alarms ------------------------------------------------------------------------------------

const zoneEvents = new Counter({
  name: `${PREFIX}zone_events_total`,
  help: 'Zone enter/exit events stored and announced, by type and zone kind.',
  labelNames: ['type', 'zone_kind'] as const,
  registers: [registry],
});
const ZONE_KINDS = ['geofence', 'event', 'conversion'] as const;
export const zoneEventCounters: Record<'enter' | 'exit', Record<(typeof ZONE_KINDS)[number], Counter.Internal>> = {
  enter: Object.fromEntries(ZONE_KINDS.map((kind) => [kind, zoneEvents.labels('enter', kind)])) as never,
  exit: Object.fromEntries(ZONE_KINDS.map((kind) => [kind, zoneEvents.labels('exit', kind)])) as never,
};
const alarmsRaised = new Counter({
  name: `${PREFIX}alarms_raised_total`,
  help: 'Alarms raised (stored as new OPEN alarms; a repeat of an OPEN one is not counted), by type.',
  labelNames: ['type'] as const,
  registers: [registry],
});
export const alarmsRaisedByType = Object.fromEntries(ALARM_TYPES.map((type) => [type, alarmsRaised.labels(type)])) as Record<
  AlarmType,
  Counter.Internal
>;
const deadLettered = new Counter({
  name: `${PREFIX}detection_dead_letters_total`,
  help: 'Detections (one alarm, or one batch\'s zone events) the database refused for a reason other than an outage: set aside and retried later, each refusal counted. kind="unkept": one the detection_dead_letters table refused too (kept in memory only).',
  labelNames: ['kind'] as const,
  registers: [registry],
});
/** `unkept`: a dead letter the detection_dead_letters table refused as well (kept in memory only, lost on restart). */
export const detectionDeadLettered = {
  alarm: deadLettered.labels('alarm'),
  zone_events: deadLettered.labels('zone_events'),
  unkept: deadLettered.labels('unkept'),
};
/** Dead letters kept in `detection_dead_letters`, deployment-wide, as of this gateway's last adoption pass (every few seconds). */
export const detectionDeadLettersStored = new Gauge({
  name: `${PREFIX}detection_dead_letters_stored`,
  help: 'Detection dead letters kept in the detection_dead_letters table (deployment-wide), as of the last adoption pass; 0 once all are stored.',
  registers: [registry],
});
const dropped = new Counter({
  name: `${PREFIX}detection_dropped_total`,
  help: 'Detections given up on: outbox entries or dead letters dropped past DETECTION_OUTBOX_MAX (each also logged at error).',
  labelNames: ['reason'] as const,
  registers: [registry],
});
export const detectionDropped = { outbox_full: dropped.labels('outbox_full'), dead_letters_full: dropped.labels('dead_letters_full') };

// --- WebSockets (gateway/ws) ---------------------------------------------------------------------------------

export const wsCoalescedPositions = new Counter({
  name: `${PREFIX}ws_coalesced_positions_total`,
  help: 'Live position frames never sent because a newer position of the same device replaced them while the subscriber was behind.',
  registers: [registry],
});
export const wsSlowConsumerDisconnects = new Counter({
  name: `${PREFIX}ws_slow_consumer_disconnects_total`,
  help: 'Sockets closed with 4008: past WS_MAX_BUFFER_BYTES (alarms), WS_MAX_FEED_BUFFER_BYTES (positions, events) or among the largest backlogs past WS_MAX_TOTAL_BACKLOG_BYTES.',
  registers: [registry],
});

// --- Bus (shared/bus) ----------------------------------------------------------------------------------------

const busPublished = new Counter({
  name: `${PREFIX}bus_published_total`,
  help: 'Messages published on the bus, by kind of channel (`positions` for every `positions:<shard>`).',
  labelNames: ['channel'] as const,
  registers: [registry],
});
const busReceived = new Counter({
  name: `${PREFIX}bus_received_total`,
  help: 'Messages received from other nodes over Redis, by kind of channel (the local bus has no other nodes).',
  labelNames: ['channel'] as const,
  registers: [registry],
});
export const busLag = new Histogram({
  name: `${PREFIX}bus_lag_seconds`,
  help: 'From a message published by another node to its arrival here, over Redis (includes the clock difference between the two hosts).',
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});
/**
 * Bus channels are a handful of kinds, a kind being the name before any `:<part>` (`positions:12` is `positions`):
 * the label is the kind, so the series stay few; children are bound on first use and kept.
 */
const boundBy = <C extends Counter<'channel'>>(counter: C) => {
  const children = new Map<string, Counter.Internal>();
  return (channel: string) => {
    let child = children.get(channel);
    if (!child) children.set(channel, (child = counter.labels(/^positions:\d+$/.test(channel) ? 'positions' : channel)));
    return child;
  };
};
export const busPublishedOn = boundBy(busPublished);
export const busReceivedOn = boundBy(busReceived);

// --- Jobs (shared/jobs, workers) -----------------------------------------------------------------------------

export const jobDuration = new Histogram({
  name: `${PREFIX}job_duration_seconds`,
  help: 'Duration of jobs run by this process, by job and report (`none` for other jobs).',
  labelNames: ['job', 'report'] as const,
  buckets: JOB_BUCKETS,
  registers: [registry],
});
export const jobFailures = new Counter({
  name: `${PREFIX}job_failures_total`,
  help: 'Jobs run by this process that failed, by job and report.',
  labelNames: ['job', 'report'] as const,
  registers: [registry],
});

// --- Webhooks (shared/webhooks/deliveries.ts) ------------------------------------------------------------------

/** One count per delivery attempt: `delivered`, `failed` (to be retried), `dead` (dead-lettered), `refused` (address not allowed). */
const webhookDeliveries = new Counter({
  name: `${PREFIX}webhook_deliveries_total`,
  help: 'Webhook delivery attempts, by outcome.',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
export const webhookAttempts = Object.fromEntries(
  ['delivered', 'failed', 'dead', 'refused'].map((outcome) => [outcome, webhookDeliveries.labels(outcome)]),
) as Record<'delivered' | 'failed' | 'dead' | 'refused', Counter.Internal>;
/** Alert when it grows past the retry schedule's first steps: some receiver has been failing that long. */
export const webhookOldestPending = new Gauge({
  name: `${PREFIX}webhook_oldest_pending_seconds`,
  help: 'Age of the oldest pending webhook delivery of the deployment (0: none), as of the last rescue pass (every minute).',
  registers: [registry],
});
/** Alert on any increase: a webhook's receiver is so far behind that events are no longer queued for it. */
export const webhookDeliveriesCapped = new Counter({
  name: `${PREFIX}webhook_deliveries_capped_total`,
  help: 'Webhook deliveries not stored because their webhook already held WEBHOOK_MAX_PENDING_PER_WEBHOOK pending ones.',
  registers: [registry],
});

// --- Read at scrape time -------------------------------------------------------------------------------------

/** What a process can tell at scrape time; every part optional (a worker has no sockets). */
export interface MetricSources {
  websockets?: () => { connections: number; subscriptions: number; backlogBytes: number };
  /** Jobs waiting and running in the queue this process feeds (the gateway's view of the shared queue). */
  jobs?: () => Promise<{ waiting: number; active: number }>;
  /** PostgreSQL server pool; undefined on the embedded database. */
  databasePool?: () => { used: number; pending: number; free: number } | undefined;
  /** Entries of the bounded in-memory maps, by name. */
  maps?: () => Record<string, number>;
  /** Rows waiting for the next group commit. */
  writerBacklog?: () => number;
  /** This gateway's view of the cluster (gateway/cluster). */
  cluster?: () => { members: number; ownedBuildings: number; readyBuildings: number; backlog: number };
  /** Newest fix time (epoch ms) detection has run, per building owned here (gateway/detection/detection-engine.ts). */
  watermarks?: () => ReadonlyMap<number, number>;
}

const sources = new Set<MetricSources>();

/** Adds a process's sources (tests may run several gateways in one process: their values add up). */
export function registerSources(source: MetricSources): () => void {
  sources.add(source);
  return () => void sources.delete(source);
}

function sum<T>(read: (source: MetricSources) => T | undefined, add: (value: T) => void): void {
  for (const source of sources) {
    const value = read(source);
    if (value !== undefined) add(value);
  }
}

new Gauge({
  name: `${PREFIX}detection_watermark_seconds`,
  help: 'Event time detection has processed, per building owned here: the newest fix time run (epoch seconds). Far behind the clock with fixes arriving: behind; not moving with none: quiet.',
  labelNames: ['building_id'] as const,
  registers: [registry],
  collect() {
    const newest = new Map<number, number>();
    sum(
      (source) => source.watermarks?.(),
      (value) => {
        for (const [buildingId, at] of value) newest.set(buildingId, Math.max(at, newest.get(buildingId) ?? -Infinity));
      },
    );
    this.reset();
    for (const [buildingId, at] of newest) this.labels(String(buildingId)).set(at / 1000);
  },
});
new Gauge({
  name: `${PREFIX}ws_connections`,
  help: 'Open WebSockets.',
  registers: [registry],
  collect() {
    let total = 0;
    sum(
      (source) => source.websockets?.(),
      (value) => (total += value.connections),
    );
    this.set(total);
  },
});
new Gauge({
  name: `${PREFIX}ws_subscriptions`,
  help: 'Topic subscriptions held by open WebSockets.',
  registers: [registry],
  collect() {
    let total = 0;
    sum(
      (source) => source.websockets?.(),
      (value) => (total += value.subscriptions),
    );
    this.set(total);
  },
});
new Gauge({
  name: `${PREFIX}ws_backlog_bytes`,
  help: 'Bytes buffered for WebSocket subscribers, not yet sent.',
  registers: [registry],
  collect() {
    let total = 0;
    sum(
      (source) => source.websockets?.(),
      (value) => (total += value.backlogBytes),
    );
    this.set(total);
  },
});
new Gauge({
  name: `${PREFIX}position_writer_backlog_rows`,
  help: 'Rows waiting for the next group commit.',
  registers: [registry],
  collect() {
    let total = 0;
    sum(
      (source) => source.writerBacklog?.(),
      (value) => (total += value),
    );
    this.set(total);
  },
});
new Gauge({
  name: `${PREFIX}job_queue_jobs`,
  help: 'Jobs in the queue, by state (waiting, active).',
  labelNames: ['state'] as const,
  registers: [registry],
  async collect() {
    // Absent rather than 0 where nobody can tell (a worker process; Redis down): 0 would read as "queue empty".
    this.reset();
    for (const source of sources) {
      const stats = await source.jobs?.().catch(() => undefined);
      if (!stats) continue;
      this.labels('waiting').inc(stats.waiting);
      this.labels('active').inc(stats.active);
    }
  },
});
new Gauge({
  name: `${PREFIX}database_pool_connections`,
  help: 'PostgreSQL pool connections, by state: used, pending (requests waiting for one), free. Absent on the embedded database.',
  labelNames: ['state'] as const,
  registers: [registry],
  collect() {
    this.reset();
    sum(
      (source) => source.databasePool?.(),
      (pool) => {
        this.labels('used').inc(pool.used);
        this.labels('pending').inc(pool.pending);
        this.labels('free').inc(pool.free);
      },
    );
  },
});
new Gauge({
  name: `${PREFIX}map_entries`,
  help: 'Entries of the bounded in-memory maps (caches, detector state, outbox, live state), by map.',
  labelNames: ['map'] as const,
  registers: [registry],
  collect() {
    this.reset();
    sum(
      (source) => source.maps?.(),
      (maps) => {
        for (const [map, size] of Object.entries(maps)) this.labels(map).inc(size);
      },
    );
  },
});

let defaultsCollected = false;
/** Event-loop delay, heap, GC, CPU and file descriptors (prom-client's defaults), once per process, when served. */
export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: registry, prefix: PREFIX });
}

// --- Cluster (gateway/cluster): detection partitioned by building across gateways -----------------------------

export const detectionCpuSeconds = new Counter({
  name: `${PREFIX}detection_cpu_seconds_total`,
  help: 'CPU seconds this process spent running the detectors (position batches and sweeps).',
  registers: [registry],
});
export const detectionPositions = new Counter({
  name: `${PREFIX}detection_positions_total`,
  help: 'Positions run through the detectors on this process (those of the buildings it owns).',
  registers: [registry],
});
export const detectionLateFixes = new Counter({
  name: `${PREFIX}detection_late_fixes_total`,
  help: "Fixes that reached detection older than their device's newest detected one by more than the reorder window, by building (re-detected in event time).",
  labelNames: ['building_id'] as const,
  registers: [registry],
});
export const detectionCorrections = new Counter({
  name: `${PREFIX}detection_corrections_total`,
  help: 'Stored zone events that late fixes contradicted (marked superseded, with a correction), by building.',
  labelNames: ['building_id'] as const,
  registers: [registry],
});
export const detectionLateQueueFixes = new Gauge({
  name: `${PREFIX}detection_late_queue_fixes`,
  help: "Late fixes waiting in this process's late queues for their device's replay, or in the replay under way (gateway/detection/late-queue.ts).",
  registers: [registry],
});
export const detectionLateReplayWait = new Histogram({
  name: `${PREFIX}detection_late_replay_wait_seconds`,
  help: 'How long a late fix waited in the late queue before the replay that took it began.',
  buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120],
  registers: [registry],
});
/** A gauge of the cluster views of this process's gateways, summed unless `combine` says otherwise. */
const clusterGauge = (
  name: string,
  help: string,
  read: (view: ReturnType<NonNullable<MetricSources['cluster']>>) => number,
  combine = (a: number, b: number) => a + b,
) =>
  new Gauge({
    name: `${PREFIX}${name}`,
    help,
    registers: [registry],
    collect() {
      let total = 0;
      sum(
        (source) => source.cluster?.(),
        (view) => (total = combine(total, read(view))),
      );
      this.set(total);
    },
  });
clusterGauge('cluster_members', 'Live gateways this gateway sees (itself included).', (view) => view.members);
clusterGauge(
  'cluster_owned_buildings',
  'Buildings whose detection this gateway owns (their shard lease is held).',
  (view) => view.ownedBuildings,
);
clusterGauge(
  'cluster_ready_buildings',
  'Owned buildings whose detector state is rebuilt and whose shard is being read.',
  (view) => view.readyBuildings,
);
// Largest, not summed: a scrape asks whether one building's detection is behind, and gateways in one process see one log.
clusterGauge(
  'cluster_shard_backlog',
  'Entries (uploads) of the shard furthest behind that this gateway appended to: appended, not yet acknowledged by its owner.',
  (view) => view.backlog,
  Math.max,
);
const pacedUploadsCounter = new Counter({
  name: `${PREFIX}paced_uploads_total`,
  help: 'Uploads that waited for detection to catch up (CLUSTER_MAX_BACKLOG): let through once it did, or refused with 503 after CLUSTER_BACKLOG_WAIT_MS.',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
export const pacedUploads = { waited: pacedUploadsCounter.labels('waited'), refused: pacedUploadsCounter.labels('refused') };
