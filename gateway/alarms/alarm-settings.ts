import type { EntityManager } from '@mikro-orm/postgresql';
import { needsResolutionComment } from '../../shared/detection/alarm-severity.js';
import type { AlarmState } from '../../shared/detection/alarm-states.js';
import { NotFoundError, ValidationError } from '../../shared/errors.js';
import type { Storage } from '../../shared/storage/index.js';

/** An organization's alarm policy (stored on its row; defaults in migrations m0018 and m0019). */
export interface OrganizationAlarmSettings {
  /** An OPEN critical alarm nobody confirmed for this long escalates, and again every as long after. */
  escalate_after_s: number;
  /** Escalations of one alarm at most (0: never). */
  escalate_max: number;
  /** Closing or marking false any alarm, not only a critical or high one, needs a comment. */
  comment_always: boolean;
  /** An OPEN DEADMAN is closed by the system when its device reports again (false: a person confirms). */
  deadman_auto_close: boolean;
}

const COLUMNS =
  'alarm_escalate_after_s as escalate_after_s, alarm_escalate_max as escalate_max, alarm_comment_always as comment_always, deadman_auto_close';

export async function readAlarmSettings(storage: Pick<Storage, 'execute'>, organizationId: string): Promise<OrganizationAlarmSettings> {
  const [row] = await storage.execute<OrganizationAlarmSettings>(`select ${COLUMNS} from organizations where id = ?`, [organizationId]);
  if (!row) throw new NotFoundError('Organization');
  return row;
}

/** Writes the given settings in `tx`; the organization's settings before and after. */
export async function writeAlarmSettings(
  tx: EntityManager,
  organizationId: string,
  changes: Partial<OrganizationAlarmSettings>,
): Promise<{ before: OrganizationAlarmSettings; after: OrganizationAlarmSettings }> {
  const column = {
    escalate_after_s: 'alarm_escalate_after_s',
    escalate_max: 'alarm_escalate_max',
    comment_always: 'alarm_comment_always',
    deadman_auto_close: 'deadman_auto_close',
  } as const;
  const [before] = await tx.execute<OrganizationAlarmSettings[]>(`select ${COLUMNS} from organizations where id = ? for update`, [
    organizationId,
  ]);
  if (!before) throw new NotFoundError('Organization');
  const set = (Object.keys(column) as (keyof OrganizationAlarmSettings)[]).filter((key) => changes[key] !== undefined);
  if (set.length === 0) return { before, after: before };
  const [after] = await tx.execute<OrganizationAlarmSettings[]>(
    `update organizations set ${set.map((key) => `${column[key]} = ?`).join(', ')}, updated_at = now() where id = ? returning ${COLUMNS}`,
    [...set.map((key) => changes[key]), organizationId],
  );
  return { before, after: after! };
}

/** The verdicts that end an alarm and so have to say why. */
const RESOLUTIONS: readonly AlarmState[] = ['CLOSED', 'MARKED_FALSE'];

/** Whether moving an alarm of this type to `to` needs a resolution comment under these settings. */
export function commentRequired(type: string, to: AlarmState, settings: Pick<OrganizationAlarmSettings, 'comment_always'>): boolean {
  return RESOLUTIONS.includes(to) && (settings.comment_always || needsResolutionComment(type));
}

/** 422 naming `comment` when the move needs one and `comment` is absent or blank. */
export function assertResolutionComment(
  type: string,
  to: AlarmState,
  comment: string | null | undefined,
  settings: Pick<OrganizationAlarmSettings, 'comment_always'>,
): void {
  if (commentRequired(type, to, settings) && !comment?.trim()) {
    throw new ValidationError([
      {
        field: 'comment',
        message: `closing or marking false ${settings.comment_always ? 'an alarm' : `a ${type} alarm`} needs a resolution comment`,
      },
    ]);
  }
}
