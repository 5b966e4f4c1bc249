import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../shared/config.js';
import { ForbiddenError, NotFoundError, ValidationError } from '../../shared/errors.js';
import type { JobQueue } from '../../shared/jobs/index.js';
import { DATA_EXPORT_JOB, type DataExportJob, type DataExportResult } from '../../shared/privacy/data-export.js';
import { erasureJob, listErasures, readErasure, recordErasure, type ErasureRequest } from '../../shared/privacy/erasure.js';
import {
  effectiveRetention,
  RETENTION_KINDS,
  RETENTION_NOTES,
  RETENTION_SELECT,
  retentionMaxima,
  retentionOf,
  retentionUpdate,
  type RetentionDays,
} from '../../shared/privacy/retention.js';
import { isTracked, type TrackingSchedule } from '../../shared/privacy/tracking-schedule.js';
import type { Storage } from '../../shared/storage/index.js';
import { can } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import type { TrackingWindows } from './tracking-windows.js';

/** Whose schedule: a user's own, or a group's (applies to its members who have none of their own). */
export type WindowSubject = { kind: 'user' | 'group'; id: string };

/** An organization's privacy settings as the API shows them. */
export interface PrivacySettings {
  /** Every report is pseudonymous for everyone but admins. */
  reports_pseudonymous: boolean;
  /** The deployment's minimum group size of a pseudonymous place cell (REPORTS_PSEUDONYMOUS_MIN_PEOPLE): read only. */
  min_people: number;
  /** Days each kind of data is kept, as the organization set them (null: the deployment's maximum). */
  retention_days: RetentionDays;
  /** The deployment's maximum per kind (null: no limit): read only. */
  retention_max_days: RetentionDays;
}

/** A tracking window as the API shows it: the schedule, or null (tracked always). */
export interface WindowView {
  schedule: TrackingSchedule | null;
  updated_at: string | null;
}

const TABLE_OF = { user: 'users', group: 'groups' } as const;

/**
 * Storage of tracking windows and erasure requests, behind the privacy routes (issue 32). Every method is scoped
 * to one organization: a subject of another is answered 404, as if it did not exist.
 */
export class PrivacyService {
  constructor(
    private readonly storage: Storage,
    private readonly windows: TrackingWindows,
    private readonly jobs: JobQueue,
    private readonly config: Pick<
      Config,
      'POSITIONS_RETENTION_DAYS' | 'AUDIT_RETENTION_DAYS' | 'JOB_TIMEOUT_MS' | 'REPORTS_PSEUDONYMOUS_MIN_PEOPLE'
    >,
  ) {
    this.maxima = retentionMaxima(config);
  }

  private readonly maxima: RetentionDays;

  async readWindow(
    organizationId: string,
    subject: WindowSubject,
    em: Pick<EntityManager, 'execute'> = this.storage.em(),
  ): Promise<WindowView> {
    await this.assertSubject(organizationId, subject, em);
    const [row] = await em.execute<{ schedule: TrackingSchedule | string; updated_at: Date | string }[]>(
      `select schedule, updated_at from tracking_windows where organization_id = ? and ${subject.kind}_id = ?`,
      [organizationId, subject.id],
    );
    if (!row) return { schedule: null, updated_at: null };
    return {
      schedule: typeof row.schedule === 'string' ? JSON.parse(row.schedule) : row.schedule,
      updated_at: new Date(row.updated_at).toISOString(),
    };
  }

  /** Sets (`schedule`) or removes (null) a window in `tx`; before and after, for the audit. Announced once committed. */
  async writeWindow(
    tx: EntityManager,
    organizationId: string,
    subject: WindowSubject,
    schedule: TrackingSchedule | null,
  ): Promise<{ before: WindowView; after: WindowView }> {
    const before = await this.readWindow(organizationId, subject, tx);
    const column = `${subject.kind}_id`;
    if (schedule) {
      // One statement, so two writers of the same window at once both succeed (the last wins) instead of one
      // failing on the unique index after both deleted nothing.
      await tx.execute(
        `insert into tracking_windows (organization_id, ${column}, schedule) values (?, ?, ?::jsonb)
         on conflict (${column}) where ${column} is not null do update set schedule = excluded.schedule, updated_at = now()`,
        [organizationId, subject.id, JSON.stringify(schedule)],
      );
    } else {
      await tx.execute(`delete from tracking_windows where organization_id = ? and ${column} = ?`, [organizationId, subject.id]);
    }
    return { before, after: await this.readWindow(organizationId, subject, tx) };
  }

  /** Tells every gateway a window changed (a group's may apply to any of its members). */
  announce(organizationId: string, subject: WindowSubject): Promise<void> {
    return this.windows.changed(subject.kind === 'user' ? { organizationId, userId: subject.id } : { organizationId });
  }

  /** What a person can read about themself: their window in effect and what is kept for how long. */
  async privacyOf(organizationId: string, userId: string) {
    const own = await this.readWindow(organizationId, { kind: 'user', id: userId });
    const [user] = await this.storage.execute<{ group_id: string | null }>('select group_id from users where id = ?', [userId]);
    const group =
      own.schedule === null && user?.group_id ? await this.readWindow(organizationId, { kind: 'group', id: user.group_id }) : undefined;
    const schedule = own.schedule ?? group?.schedule ?? null;
    const days = effectiveRetention((await this.settings(organizationId)).retention_days, this.maxima);
    return {
      user_id: userId,
      tracking_window: {
        source: own.schedule ? 'user' : group?.schedule ? 'group' : 'none',
        schedule,
        tracked_always: schedule === null,
        tracked_now: isTracked(schedule, Date.now()),
      },
      kept: [
        ...RETENTION_KINDS.map((kind) => ({ data: kind, retention_days: days[kind], note: RETENTION_NOTES[kind] })),
        { data: 'alarms', retention_days: null, note: 'kept for the safety record; an erasure removes the person, device and place' },
      ],
    };
  }

  /** Records an erasure (its audit entry in the same transaction) and queues its job once committed. */
  async requestErasure(
    organizationId: string,
    userId: string,
    range: { from?: string; to?: string },
    requestedBy: string,
    audit: (tx: EntityManager, request: ErasureRequest) => Promise<void>,
  ): Promise<ErasureRequest> {
    const request = await this.storage.em().transactional(async (tx) => {
      // Another organization's user is 404 whatever the range.
      await this.assertSubject(organizationId, { kind: 'user', id: userId }, tx);
      if (range.from && range.to && Date.parse(range.from) > Date.parse(range.to)) {
        throw new ValidationError([{ field: 'from', message: 'must not be after to' }]);
      }
      const created = await recordErasure(tx, { organizationId, userId, ...range, requestedBy, cause: 'request' });
      await audit(tx, created);
      return created;
    });
    await this.jobs.schedule(erasureJob(request));
    return request;
  }

  /** A person's erasures, newest first; still there once the user is deleted (the one the deletion started among them). */
  async erasures(organizationId: string, userId: string): Promise<ErasureRequest[]> {
    const erasures = await listErasures(this.storage, organizationId, userId);
    // None, and no such user here: 404, as for any id of another organization.
    if (erasures.length === 0) await this.assertSubject(organizationId, { kind: 'user', id: userId }, this.storage.em());
    return erasures;
  }

  async erasure(organizationId: string, userId: string, id: string): Promise<ErasureRequest> {
    const request = await readErasure(this.storage, organizationId, id);
    if (!request || request.user_id !== userId) throw new NotFoundError('Erasure');
    return request;
  }

  /**
   * Everything held about a person, as a zip (shared/privacy/data-export.ts), built by a job the request waits for as a
   * report's does. The person themself, or whoever may export others' data (admins); another organization's user is
   * 404, a colleague's data without the right 403 (as reading the user is).
   */
  async exportData(principal: Principal, userId: string, range: { from?: string; to?: string }): Promise<DataExportResult> {
    await this.assertSubject(principal.organizationId, { kind: 'user', id: userId }, this.storage.em());
    if (userId !== principal.userId && !can(principal.role, 'users:export-data')) {
      throw new ForbiddenError(`Your role (${principal.role}) may export only your own data`);
    }
    if (range.from && range.to && Date.parse(range.from) > Date.parse(range.to)) {
      throw new ValidationError([{ field: 'query.from', message: 'must not be after to' }]);
    }
    const job: DataExportJob = { organizationId: principal.organizationId, userId, ...range };
    return this.jobs.run<DataExportResult>(
      { name: DATA_EXPORT_JOB, organizationId: principal.organizationId, data: job },
      this.config.JOB_TIMEOUT_MS,
    );
  }

  /** The organization's privacy settings, and the deployment's minimum group size of pseudonymous cells and maximum retention. */
  async settings(organizationId: string, em: Pick<EntityManager, 'execute'> = this.storage.em()): Promise<PrivacySettings> {
    const [row] = await em.execute<(Record<string, unknown> & { reports_pseudonymous: boolean })[]>(
      `select reports_pseudonymous, ${RETENTION_SELECT} from organizations where id = ?`,
      [organizationId],
    );
    if (!row) throw new NotFoundError('Organization');
    return {
      reports_pseudonymous: row.reports_pseudonymous,
      min_people: this.config.REPORTS_PSEUDONYMOUS_MIN_PEOPLE,
      retention_days: retentionOf(row),
      retention_max_days: this.maxima,
    };
  }

  /** Writes the settings in `tx`; before and after, for the audit. A period past the deployment's maximum is 422 naming it. */
  async writeSettings(
    tx: EntityManager,
    organizationId: string,
    changes: { reports_pseudonymous?: boolean; retention_days?: Partial<RetentionDays> },
  ): Promise<{ before: PrivacySettings; after: PrivacySettings }> {
    const retention = changes.retention_days ?? {};
    const tooLong = RETENTION_KINDS.filter((kind) => {
      const days = retention[kind];
      const max = this.maxima[kind];
      return days !== undefined && days !== null && max !== null && days > max;
    });
    if (tooLong.length > 0) {
      throw new ValidationError(
        tooLong.map((kind) => ({
          field: `retention_days.${kind}`,
          message: `at most ${this.maxima[kind]} days, the deployment's maximum (null keeps it that long)`,
        })),
      );
    }
    await tx.execute('select id from organizations where id = ? for update', [organizationId]);
    const before = await this.settings(organizationId, tx);
    if (changes.reports_pseudonymous !== undefined) {
      await tx.execute('update organizations set reports_pseudonymous = ?, updated_at = now() where id = ?', [
        changes.reports_pseudonymous,
        organizationId,
      ]);
    }
    const update = retentionUpdate(retention);
    if (update.params.length > 0) {
      await tx.execute(`update organizations set ${update.set}, updated_at = now() where id = ?`, [...update.params, organizationId]);
    }
    return { before, after: await this.settings(organizationId, tx) };
  }

  private async assertSubject(organizationId: string, subject: WindowSubject, em: Pick<EntityManager, 'execute'>): Promise<void> {
    const [row] = await em.execute<{ id: string }[]>(`select id from ${TABLE_OF[subject.kind]} where organization_id = ? and id = ?`, [
      organizationId,
      subject.id,
    ]);
    if (!row) throw new NotFoundError(subject.kind === 'user' ? 'User' : 'Group');
  }
}
