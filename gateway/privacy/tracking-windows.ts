import type { Bus, TrackingWindowChange } from '../bus-channels.js';
import { positionsOutsideWindow } from '../../shared/metrics/metrics.js';
import { isTracked, type TrackingSchedule } from '../../shared/privacy/tracking-schedule.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { Storage } from '../../shared/storage/index.js';
import { pgArray } from '../../shared/storage/pg-array.js';
import type { PipelineStep } from '../pipeline/pipeline.js';
import type { PositionBatch } from '../pipeline/position-batch.js';

interface Cached {
  schedule: TrackingSchedule | null;
  readAt: number;
}

/** Users cached over all organizations; past this the cache starts again empty (a burst of new users re-reads once). */
const MAX_CACHED = 200_000;

/** Each user's schedule in effect: their own, else their group's, else none (tracked always). */
const SELECT_SCHEDULES = `select u.id as user_id, coalesce(own.schedule, grp.schedule) as schedule
  from users u
  left join tracking_windows own on own.user_id = u.id
  left join tracking_windows grp on grp.group_id = u.group_id
  where u.organization_id = ? and u.id = any(?::uuid[])`;

/**
 * The schedules uploads are filtered by, per gateway. A user's schedule is read once (one query per upload for all
 * its users not cached yet, never one per position) and kept until a change announced on the bus drops it on every
 * gateway, a `ttlMs` backstop should the message be lost, or the bus's resync.
 */
export class TrackingWindows {
  private readonly cache = new Map<string, Map<string, Cached>>();

  constructor(
    private readonly storage: Pick<Storage, 'execute'>,
    private readonly bus: Bus,
    private readonly ttlMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  async start(): Promise<void> {
    await this.bus.subscribe('tracking-windows:changed', (change) => this.forget(change));
    this.bus.onResync(() => this.cache.clear());
  }

  /** Announces a change to every gateway (this one included). */
  changed(change: TrackingWindowChange): Promise<void> {
    this.forget(change);
    return this.bus.publish('tracking-windows:changed', change);
  }

  /** The schedule in effect for each of these users of one organization (null: none). */
  async schedules(organizationId: string, userIds: Iterable<string>): Promise<Map<string, TrackingSchedule | null>> {
    const now = this.now();
    const found = new Map<string, TrackingSchedule | null>();
    const missing: string[] = [];
    const organization = this.cache.get(organizationId);
    for (const userId of userIds) {
      if (found.has(userId)) continue;
      const cached = organization?.get(userId);
      if (cached && now - cached.readAt < this.ttlMs) found.set(userId, cached.schedule);
      else missing.push(userId);
    }
    if (missing.length === 0) return found;
    const rows = await this.storage.execute<{ user_id: string; schedule: TrackingSchedule | string | null }>(SELECT_SCHEDULES, [
      organizationId,
      pgArray(missing),
    ]);
    const read = new Map(
      rows.map((row) => [row.user_id, typeof row.schedule === 'string' ? (JSON.parse(row.schedule) as TrackingSchedule) : row.schedule]),
    );
    if ([...this.cache.values()].reduce((sum, users) => sum + users.size, 0) > MAX_CACHED) this.cache.clear();
    let users = this.cache.get(organizationId);
    if (!users) this.cache.set(organizationId, (users = new Map()));
    for (const userId of missing) {
      const schedule = read.get(userId) ?? null;
      users.set(userId, { schedule, readAt: now });
      found.set(userId, schedule);
    }
    return found;
  }

  /**
   * Which of these users are outside their tracking window at `now` (their positions are dropped): live screens show
   * them as not tracked now instead of their last dot (issue 32).
   */
  async untrackedNow(organizationId: string, userIds: Iterable<string>, now = this.now()): Promise<Set<string>> {
    const untracked = new Set<string>();
    for (const [userId, schedule] of await this.schedules(organizationId, userIds)) if (!isTracked(schedule, now)) untracked.add(userId);
    return untracked;
  }

  private forget(change: TrackingWindowChange): void {
    if (change.userId) this.cache.get(change.organizationId)?.delete(change.userId);
    else this.cache.delete(change.organizationId);
  }
}

/**
 * The pipeline step (issue 32): drops the positions a person's tracking window does not cover, before anything
 * is raised, published, stored or detected on them (a pipeline without windows keeps all). The upload is still answered 204: the app need not know. A
 * pose carrying DANGER or an assistance request is always kept, so its alarm is raised with its place.
 */
export function trackingWindowStep(windows: TrackingWindows | undefined): PipelineStep<PositionBatch> {
  return {
    name: 'tracking-window',
    critical: true,
    run: async (batch) => {
      const { records, poses } = batch;
      if (!windows) return;
      const userIds = new Set<string>();
      for (const record of records) if (record.userId !== null) userIds.add(record.userId);
      if (userIds.size === 0) return;
      const schedules = await windows.schedules(batch.principal.organizationId, userIds);
      const kept: PositionRecord[] = [];
      const keptPoses: typeof poses = [];
      for (let index = 0; index < records.length; index++) {
        const record = records[index]!;
        const pose = poses[index]!;
        const schedule = record.userId === null ? null : schedules.get(record.userId);
        if (pose.danger || pose.assistance_request || isTracked(schedule, record.timestamp)) {
          kept.push(record);
          keptPoses.push(pose);
        }
      }
      if (kept.length === records.length) return;
      positionsOutsideWindow.inc(records.length - kept.length);
      batch.records = kept;
      batch.poses = keptPoses;
    },
  };
}
