import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { severityOf } from '../../shared/detection/alarm-severity.js';
import { ALARM_TRANSITIONS, canTransition, type AlarmState, type AlarmType } from '../../shared/detection/alarm-states.js';
import { ConflictError, NotFoundError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import { alarmsRaisedByType } from '../../shared/metrics/metrics.js';
import type { SilenceEvidence } from '../../shared/detection/silence-evidence.js';
import { UserSchema } from '../../shared/storage/entities/index.js';
import { pgArray } from '../../shared/storage/pg-array.js';
import type { Storage } from '../../shared/storage/index.js';
import type { Bus } from '../bus-channels.js';
import type { AlarmEventKind, AlarmEventMessage, AlarmHistoryEntry, AlarmView } from './alarm-event-message.js';

/** Runs inside an alarm write's transaction, with the alarm before it (null when raised): the API's audit entry. */
export type AlarmWriteHook = (tx: EntityManager, message: AlarmEventMessage, before: AlarmView | null) => Promise<void>;

export interface RaiseAlarm {
  organizationId: string;
  type: AlarmType;
  deviceId?: string | null;
  userId?: string | null;
  buildingId?: number | null;
  floorId?: number | null;
  geofenceId?: string | null;
  x?: number | null;
  y?: number | null;
  lat?: number | null;
  lng?: number | null;
  details?: Record<string, unknown>;
  by: AlarmHistoryEntry['by'];
  comment?: string | null;
  /** Only updates the OPEN alarm of the same device and kind (details merged, no new occurrence); nothing when none is open. */
  onlyIfOpen?: boolean;
  /**
   * Names the condition that raised it (a detector's stay, a pose's button press). A raise whose key is already
   * stored changes nothing, so a raise retried after an outage, or after an answer lost with the connection,
   * counts once.
   */
  idempotencyKey?: string;
  /** Presses folded into this one raise (a batch's danger poses): counted as that many occurrences. Default 1. */
  occurrences?: number;
}

export interface AlarmRow {
  id: string;
  seq: string | number;
  type: string;
  state: AlarmState;
  organization_id: string;
  building_id: number | null;
  floor_id: number | null;
  device_id: string | null;
  user_id: string | null;
  geofence_id: string | null;
  x: number | null;
  y: number | null;
  lat: number | null;
  lng: number | null;
  details: Record<string, unknown> | string;
  occurrences: number;
  history: AlarmHistoryEntry[] | string;
  created_at: Date | string;
  updated_at: Date | string;
}

const json = <T>(value: T | string): T => (typeof value === 'string' ? (JSON.parse(value) as T) : value);

export function presentAlarm(row: AlarmRow): AlarmView {
  const hasPosition = row.floor_id !== null || row.lat !== null || row.x !== null;
  const details = json<Record<string, unknown>>(row.details);
  return {
    id: row.id,
    seq: Number(row.seq),
    type: row.type,
    severity: severityOf(row.type),
    state: row.state,
    organization_id: row.organization_id,
    building_id: row.building_id,
    floor_id: row.floor_id,
    device_id: row.device_id,
    user_id: row.user_id,
    geofence_id: row.geofence_id,
    position: hasPosition
      ? {
          floor_id: row.floor_id,
          cartesians: row.x !== null && row.y !== null ? { x: row.x, y: row.y } : null,
          georeferences: row.lat !== null && row.lng !== null ? { lat: row.lat, lng: row.lng } : null,
        }
      : null,
    details,
    occurrences: row.occurrences,
    history: json(row.history),
    contact_restored_at: typeof details.contact_restored_at === 'string' ? details.contact_restored_at : null,
    occurred_at: typeof details.occurred_at === 'string' ? details.occurred_at : new Date(row.created_at).toISOString(),
    late: details.late === true,
    silence_evidence: (details.silence_evidence as SilenceEvidence | undefined) ?? null,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
  };
}

/** A keyed raise as recorded with the alarm it folded into: its key and the details it was raised with. */
export interface FoldedRaise {
  key: string;
  details: Record<string, unknown>;
}

/** How often idempotency keys past any retry are pruned. */
const PRUNE_EVERY_MS = 3600_000;

/** Thrown to roll back a repeat's count that found no OPEN alarm. */
const NO_OPEN_ALARM = Symbol('no OPEN alarm');

/**
 * Told of every alarm event: `stored` runs in the transaction that stores it (so what it writes commits with
 * the event or not at all), `committed` after the commit with what `stored` returned. Webhooks use it.
 */
export interface AlarmEventHook {
  stored(tx: EntityManager, message: AlarmEventMessage): Promise<unknown>;
  committed(handle: unknown): Promise<void>;
}

/**
 * A raise folding into an OPEN alarm whose condition happened before the one the alarm shows (a late max stay, a
 * press from an offline buffer, found after a later one): counted, but the alarm keeps showing the latest in event
 * time, its details and place, whatever order they reached the server in (issue 30; `occurred_at` is written by
 * `toISOString`, so the texts compare as the times do). Without `occurred_at` on both sides, the new raise shows.
 */
const OLDER_RAISE = `(excluded.details->>'occurred_at' < a.details->>'occurred_at')`;
const shownUnlessOlder = (column: string) =>
  `${column} = case when ${OLDER_RAISE} then a.${column} else coalesce(excluded.${column}, a.${column}) end`;

/**
 * Alarms are stored before they are pushed. Each raise or state change takes the organization's next `seq`
 * in its own transaction, writes the alarm and an alarm_events row, and only after the commit is announced
 * on the bus; a subscriber that missed some replays them from alarm_events by seq.
 */
export class AlarmService {
  private maintenance?: NodeJS.Timeout;

  constructor(
    private readonly storage: Storage,
    private readonly bus: Bus,
    private readonly hook?: AlarmEventHook,
    private readonly logger?: Logger,
  ) {}

  async nextSeq(tx: EntityManager, organizationId: string): Promise<number> {
    // The row lock on the organization's counter serialises its alarm writes: commit order is seq order.
    const [row] = await tx.execute<{ last_seq: string }[]>(
      `insert into alarm_sequences (organization_id, last_seq) values (?, 1)
       on conflict (organization_id) do update set last_seq = alarm_sequences.last_seq + 1 returning last_seq`,
      [organizationId],
    );
    return Number(row!.last_seq);
  }

  /** Stores the event of an alarm row just written (its seq taken) and hands it to the hook, in `tx`. */
  async recordEvent(tx: EntityManager, row: AlarmRow, kind: AlarmEventKind): Promise<AlarmEventMessage> {
    const view = presentAlarm(row);
    await tx.execute('insert into alarm_events (organization_id, seq, alarm_id, kind, building_id, alarm) values (?, ?, ?, ?, ?, ?)', [
      view.organization_id,
      view.seq,
      view.id,
      kind,
      view.building_id,
      JSON.stringify(view),
    ]);
    const message: AlarmEventMessage = {
      organizationId: view.organization_id,
      buildingId: view.building_id,
      event: { ...view, event: kind },
    };
    if (this.hook) this.hooked.set(message, await this.hook.stored(tx, message));
    return message;
  }

  /** What the hook's `stored` returned, per message, until `committed` takes it. */
  private readonly hooked = new WeakMap<AlarmEventMessage, unknown>();

  /** Raises an alarm, or updates the OPEN one of the same device, kind and geofence (no flood of repeats). */
  async raise(request: RaiseAlarm, inTransaction?: AlarmWriteHook): Promise<AlarmEventMessage> {
    const message = (await this.store({ ...request, idempotencyKey: undefined }, inTransaction))!;
    await this.announce([message]);
    return message;
  }

  /**
   * `raise` for alarms raised together (a batch's, a sweep's), each a condition named by `idempotencyKey` and so
   * stored at most once however often it is retried (undefined in its place when its key was already stored:
   * nothing new to announce; an `onlyIfOpen` one gives the events it stored, if any). They are stored one after the other, each in its own transaction, and what was
   * stored is announced in one bus message, in the order stored (seq order within an organization). When one
   * fails, those stored before it are announced all the same, then the error is thrown.
   */
  async raiseAllOnce(requests: readonly (RaiseAlarm & { idempotencyKey: string })[]): Promise<(AlarmEventMessage | undefined)[]> {
    const messages: (AlarmEventMessage | undefined)[] = [];
    try {
      for (const request of requests) messages.push(...(request.onlyIfOpen ? await this.updateOpen(request) : [await this.store(request)]));
    } finally {
      await this.announce(messages.filter((message): message is AlarmEventMessage => message !== undefined));
    }
    return messages;
  }

  /**
   * Adds each request's `occurrences` to the OPEN alarm of its device, kind and subject, and moves it to the request's
   * place, without an alarm event (a debounced repeat of an alarm button: counted, not announced each time; the next
   * event carries the count and place), stored at most once per key. Returns
   * the requests that found no OPEN alarm (closed meanwhile): nothing was written for them, so they are raised.
   */
  async countRepeats<R extends RaiseAlarm & { idempotencyKey: string }>(requests: readonly R[]): Promise<R[]> {
    const absent: R[] = [];
    for (const request of requests) {
      const counted = await this.storage
        .em()
        .transactional(async (tx) => {
          const fresh = await tx.execute<{ key: string }[]>(
            'insert into alarm_raise_keys (organization_id, key) values (?, ?) on conflict do nothing returning key',
            [request.organizationId, request.idempotencyKey],
          );
          if (fresh.length === 0) return true;
          const updated = await tx.execute<{ id: string }[]>(
            `update alarms set occurrences = occurrences + ?, updated_at = now(),
             building_id = coalesce(?, building_id), floor_id = coalesce(?, floor_id), x = coalesce(?, x), y = coalesce(?, y), lat = coalesce(?, lat), lng = coalesce(?, lng)
           where organization_id = ? and type = ? and coalesce(device_id, '') = ? and coalesce(geofence_id, '00000000-0000-0000-0000-000000000000'::uuid) = coalesce(?::uuid, '00000000-0000-0000-0000-000000000000'::uuid)
             and coalesce(user_id, '00000000-0000-0000-0000-000000000000'::uuid) = coalesce(?::uuid, '00000000-0000-0000-0000-000000000000'::uuid) and state = 'OPEN'
           returning id`,
            [
              request.occurrences ?? 1,
              request.buildingId ?? null,
              request.floorId ?? null,
              request.x ?? null,
              request.y ?? null,
              request.lat ?? null,
              request.lng ?? null,
              request.organizationId,
              request.type,
              request.deviceId ?? '',
              request.geofenceId ?? null,
              request.userId ?? null,
            ],
          );
          // No OPEN alarm: undo the key too, so that the raise which follows stores it.
          if (updated.length === 0) throw NO_OPEN_ALARM;
          return true;
        })
        .catch((error: unknown) => (error === NO_OPEN_ALARM ? false : Promise.reject(error)));
      if (!counted) absent.push(request);
    }
    return absent;
  }

  /** Forgets keys older than any retry could be (the outbox retries for minutes, apps resend for days). */
  async pruneIdempotencyKeys(olderThanDays = 30): Promise<void> {
    await this.storage.execute(`delete from alarm_raise_keys where created_at < now() - make_interval(days => ?)`, [olderThanDays]);
  }

  /** Prunes the idempotency keys now, then every `intervalMs` (hourly), until `stopMaintenance`. */
  startMaintenance(intervalMs = PRUNE_EVERY_MS): void {
    const run = () =>
      this.pruneIdempotencyKeys().catch((error) => this.logger?.warn({ err: error }, 'pruning alarm idempotency keys failed'));
    void run();
    this.maintenance ??= setInterval(run, intervalMs).unref();
  }

  stopMaintenance(): void {
    clearInterval(this.maintenance);
    this.maintenance = undefined;
  }

  private async store(request: RaiseAlarm, inTransaction?: AlarmWriteHook): Promise<AlarmEventMessage | undefined> {
    const now = new Date();
    const history: AlarmHistoryEntry[] = [
      { state: 'OPEN', from: null, at: now.toISOString(), by: request.by, comment: request.comment ?? null },
    ];
    const message = await this.storage.em().transactional(async (tx) => {
      if (request.idempotencyKey !== undefined) {
        // In the raise's own transaction: the key is stored if and only if the alarm is.
        const fresh = await tx.execute<{ key: string }[]>(
          'insert into alarm_raise_keys (organization_id, key) values (?, ?) on conflict do nothing returning key',
          [request.organizationId, request.idempotencyKey],
        );
        if (fresh.length === 0) return undefined;
      }
      // One statement (alarms are on the path a control room waits on): take the organization's next seq, whose
      // row lock serialises the organization's alarm writes so commit order is seq order, then insert the alarm
      // or, when one of the same device, kind, geofence and subject user is OPEN, update that one (another
      // person's alarm is never the one updated, m0016). The partial unique index is the arbiter, and ON CONFLICT
      // sees rows committed after this statement's snapshot, unlike a SELECT would.
      const [row] = await tx.execute<(AlarmRow & { inserted: boolean })[]>(
        `with next as (
           insert into alarm_sequences (organization_id, last_seq) values (?, 1)
           on conflict (organization_id) do update set last_seq = alarm_sequences.last_seq + 1 returning last_seq
         )
         insert into alarms as a (id, organization_id, seq, type, state, building_id, floor_id, x, y, lat, lng, device_id, user_id, geofence_id, details, history, occurrences, created_at, updated_at)
         values (?, ?, (select last_seq from next), ?, 'OPEN', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?)
         on conflict (organization_id, type, coalesce(device_id, case when user_id is null then 'building:' || building_id::text end, ''), coalesce(geofence_id, '00000000-0000-0000-0000-000000000000'::uuid), coalesce(user_id, '00000000-0000-0000-0000-000000000000'::uuid)) where state = 'OPEN'
         do update set seq = excluded.seq, occurrences = a.occurrences + excluded.occurrences, updated_at = excluded.updated_at,
           ${shownUnlessOlder('building_id')}, ${shownUnlessOlder('floor_id')}, ${shownUnlessOlder('x')}, ${shownUnlessOlder('y')},
           ${shownUnlessOlder('lat')}, ${shownUnlessOlder('lng')},
           details = case when ${OLDER_RAISE} then a.details else a.details || excluded.details end
         returning a.*, (a.xmax = 0) as inserted`,
        [
          request.organizationId,
          randomUUID(),
          request.organizationId,
          request.type,
          request.buildingId ?? null,
          request.floorId ?? null,
          request.x ?? null,
          request.y ?? null,
          request.lat ?? null,
          request.lng ?? null,
          request.deviceId ?? null,
          request.userId ?? null,
          request.geofenceId ?? null,
          JSON.stringify(request.details ?? {}),
          JSON.stringify(history),
          request.occurrences ?? 1,
          now,
          now,
        ],
      );
      // The raise's record: the alarm it went into (a new one, or the OPEN one it folded into) and its own details.
      if (request.idempotencyKey !== undefined)
        await tx.execute('update alarm_raise_keys set alarm_id = ?, details = ?::jsonb where organization_id = ? and key = ?', [
          row!.id,
          JSON.stringify(request.details ?? {}),
          request.organizationId,
          request.idempotencyKey,
        ]);
      const event = await this.recordEvent(tx, row!, row!.inserted ? 'raised' : 'updated');
      await inTransaction?.(tx, event, null);
      return event;
    });
    if (message?.event.event === 'raised') alarmsRaisedByType[request.type].inc();
    return message;
  }

  /**
   * Forgets these raise keys: their conditions can alarm again (a withdrawn stay's, should later fixes show it after all).
   * Inside `tx` when given (unfold's transaction), else on its own.
   */
  async forgetRaises(organizationId: string, keys: readonly string[], tx?: EntityManager): Promise<void> {
    if (keys.length === 0) return;
    const sql = 'delete from alarm_raise_keys where organization_id = ? and key = any(?::text[])';
    const params = [organizationId, pgArray(keys)];
    await (tx ? tx.execute(sql, params) : this.storage.execute(sql, params));
  }

  /** The keyed raises folded into each of these alarms, oldest first (m0035; none recorded for older raises). */
  async raisesOf(organizationId: string, alarmIds: readonly string[]): Promise<Map<string, FoldedRaise[]>> {
    const raises = new Map<string, FoldedRaise[]>();
    if (alarmIds.length === 0) return raises;
    const rows = await this.storage.execute<{ alarm_id: string; key: string; details: Record<string, unknown> | string }>(
      `select alarm_id, key, details from alarm_raise_keys
       where organization_id = ? and alarm_id = any(?::uuid[]) and details is not null order by created_at, key`,
      [organizationId, pgArray(alarmIds)],
    );
    for (const row of rows) {
      const details = typeof row.details === 'string' ? (JSON.parse(row.details) as Record<string, unknown>) : row.details;
      let list = raises.get(row.alarm_id);
      if (!list) raises.set(row.alarm_id, (list = []));
      list.push({ key: row.key, details });
    }
    return raises;
  }

  /**
   * Takes withdrawn raises out of the OPEN alarm they folded into, which stands for the others: it shows `shown`
   * (the details of the raise it now stands for), counts the withdrawn ones no more, and their keys are freed so
   * their conditions can alarm again. Every screen gets the alarm as updated. Nothing when it is no longer OPEN.
   */
  async unfold(organizationId: string, alarmId: string, withdrawn: readonly string[], shown: Record<string, unknown>): Promise<void> {
    const message = await this.storage.em().transactional(async (tx) => {
      await this.forgetRaises(organizationId, withdrawn, tx);
      const seq = await this.nextSeq(tx, organizationId);
      const [row] = await tx.execute<AlarmRow[]>(
        `update alarms set details = ?::jsonb, occurrences = greatest(1, occurrences - ?), seq = ?, updated_at = now()
         where organization_id = ? and id = ? and state = 'OPEN' returning *`,
        [JSON.stringify(shown), withdrawn.length, seq, organizationId, alarmId],
      );
      return row ? this.recordEvent(tx, row, 'updated') : undefined;
    });
    if (message) await this.announce([message]);
  }

  /**
   * Withdraws an alarm every raise of which later fixes contradicted: marked `superseded` first, so the closing event
   * every screen gets says why, its raise keys freed so their conditions can alarm again, then closed by the system.
   * An alarm already closed by an operator stays as it is.
   */
  async supersede(organizationId: string, alarmId: string, keys: readonly string[]): Promise<void> {
    await this.storage.execute(
      `update alarms set details = details || '{"superseded": true}'::jsonb where organization_id = ? and id = ?`,
      [organizationId, alarmId],
    );
    await this.forgetRaises(organizationId, keys);
    await this.changeState(
      organizationId,
      alarmId,
      'CLOSED',
      'superseded: fixes that arrived late show the stay did not run over',
      'system',
    ).catch((error) => {
      if (!(error instanceof ConflictError)) throw error;
    });
  }

  /**
   * A raise `onlyIfOpen` (through `raiseAllOnce`): new details for the OPEN alarm of the device and kind (not a new occurrence), or nothing
   * when none is open. A DEADMAN told its device is back (`details.contact_restored_at`) is also closed, by the
   * system, when the organization asks for it (`deadman_auto_close`). Stored once per idempotency key.
   */
  private updateOpen(request: RaiseAlarm): Promise<AlarmEventMessage[]> {
    return this.storage.em().transactional(async (tx) => {
      if (request.idempotencyKey !== undefined) {
        const fresh = await tx.execute<{ key: string }[]>(
          'insert into alarm_raise_keys (organization_id, key) values (?, ?) on conflict do nothing returning key',
          [request.organizationId, request.idempotencyKey],
        );
        if (fresh.length === 0) return [];
      }
      const [open] = await tx.execute<{ id: string }[]>(
        `select id from alarms where organization_id = ? and type = ? and state = 'OPEN' and coalesce(device_id, case when user_id is null then 'building:' || building_id::text end, '') = ? for update`,
        [request.organizationId, request.type, request.deviceId ?? (request.buildingId != null ? `building:${request.buildingId}` : '')],
      );
      if (!open) return [];
      const [row] = await tx.execute<AlarmRow[]>(
        `update alarms set seq = ?, updated_at = now(), details = details || ?::jsonb where id = ? returning *`,
        [await this.nextSeq(tx, request.organizationId), JSON.stringify(request.details ?? {}), open.id],
      );
      const updated = await this.recordEvent(tx, row!, 'updated');
      if (request.type !== 'DEADMAN' || request.details?.contact_restored_at === undefined) return [updated];
      const [organization] = await tx.execute<{ deadman_auto_close: boolean }[]>(
        'select deadman_auto_close from organizations where id = ?',
        [request.organizationId],
      );
      if (!organization?.deadman_auto_close) return [updated];
      const entry: AlarmHistoryEntry = {
        state: 'CLOSED',
        from: 'OPEN',
        at: new Date().toISOString(),
        by: 'system',
        comment: 'Contact restored: the device reported again',
      };
      const [closed] = await tx.execute<AlarmRow[]>(
        `update alarms set state = 'CLOSED', seq = ?, updated_at = now(), history = history || ?::jsonb where id = ? returning *`,
        [await this.nextSeq(tx, request.organizationId), JSON.stringify([entry]), open.id],
      );
      return [updated, await this.recordEvent(tx, closed!, 'state_changed')];
    });
  }

  /**
   * Adds to an alarm's details whatever its state (evidence learned after it was raised: fixes that arrived late,
   * docs/event-time.md), as an `updated` event; its state and history stay as they are.
   */
  async amendDetails(organizationId: string, id: string, details: Record<string, unknown>): Promise<AlarmEventMessage | undefined> {
    const message = await this.storage.em().transactional(async (tx) => {
      const [current] = await tx.execute<{ id: string }[]>('select id from alarms where id = ? and organization_id = ? for update', [
        id,
        organizationId,
      ]);
      if (!current) return undefined;
      const [row] = await tx.execute<AlarmRow[]>(
        'update alarms set seq = ?, updated_at = now(), details = details || ?::jsonb where id = ? returning *',
        [await this.nextSeq(tx, organizationId), JSON.stringify(details), id],
      );
      return this.recordEvent(tx, row!, 'updated');
    });
    if (message) await this.announce([message]);
    return message;
  }

  /** Moves an alarm along the transition table (409 for an illegal move), recording who and when. */
  async changeState(
    organizationId: string,
    id: string,
    to: AlarmState,
    comment: string | null,
    by: AlarmHistoryEntry['by'],
    inTransaction?: AlarmWriteHook,
  ): Promise<AlarmEventMessage> {
    const message = await this.storage.em().transactional(async (tx) => {
      const seq = await this.nextSeq(tx, organizationId);
      const [current] = await tx.execute<AlarmRow[]>('select * from alarms where id = ? and organization_id = ? for update', [
        id,
        organizationId,
      ]);
      if (!current) throw new NotFoundError('Alarm');
      if (!canTransition(current.state, to)) {
        const allowed = ALARM_TRANSITIONS[current.state];
        throw new ConflictError(
          `An alarm in state ${current.state} cannot become ${to}${allowed.length ? ` (allowed: ${allowed.join(', ')})` : ' (final state)'}`,
        );
      }
      const entry: AlarmHistoryEntry = { state: to, from: current.state, at: new Date().toISOString(), by, comment };
      const [row] = await tx.execute<AlarmRow[]>(
        `update alarms set state = ?, seq = ?, updated_at = now(), history = history || ?::jsonb where id = ? returning *`,
        [to, seq, JSON.stringify([entry]), id],
      );
      const event = await this.recordEvent(tx, row!, 'state_changed');
      await inTransaction?.(tx, event, presentAlarm(current));
      return event;
    });
    await this.announce([message]);
    return message;
  }

  /** Stored events, in seq order, to every gateway in one bus message, then to the hook. */
  async announce(messages: readonly AlarmEventMessage[]): Promise<void> {
    if (messages.length === 0) return;
    await this.bus.publish('alarms', messages).catch(() => undefined); // stored already: replay covers a lost push
    if (!this.hook) return;
    for (const message of messages) {
      const handle = this.hooked.get(message);
      this.hooked.delete(message);
      await this.hook.committed(handle).catch(() => undefined); // stored already, with the event
    }
  }

  /** Whether the user is someone of this organization: an alarm about another tenant's user is about no one here. */
  async isMember(organizationId: string, userId: string): Promise<boolean> {
    return (await this.storage.em().findOne(UserSchema, { id: userId, organization: organizationId })) !== null;
  }

  /** Who owns the organization's device with this identifier: null when no one does, or there is no such device. */
  async deviceOwner(organizationId: string, deviceId: string): Promise<string | null> {
    const [device] = await this.storage.execute<{ user_id: string | null }>(
      'select user_id from devices where organization_id = ? and identifier = ?',
      [organizationId, deviceId],
    );
    return device?.user_id ?? null;
  }

  async get(organizationId: string, id: string): Promise<AlarmView> {
    const [row] = await this.storage.execute<AlarmRow>('select * from alarms where id = ? and organization_id = ?', [id, organizationId]);
    if (!row) throw new NotFoundError('Alarm');
    return presentAlarm(row);
  }

  /** Events after `sinceSeq`, in order, in pages (replay for a reconnecting subscriber). */
  async *eventsSince(
    organizationId: string,
    sinceSeq: number,
    buildingId?: number,
    pageSize = 1000,
  ): AsyncGenerator<AlarmEventMessage['event']> {
    let after = sinceSeq;
    for (;;) {
      const rows = await this.storage.execute<{ seq: string; kind: AlarmEventKind; alarm: AlarmView | string }>(
        `select seq, kind, alarm from alarm_events where organization_id = ? and seq > ? ${buildingId === undefined ? '' : 'and building_id = ?'} order by seq limit ?`,
        buildingId === undefined ? [organizationId, after, pageSize] : [organizationId, after, buildingId, pageSize],
      );
      for (const row of rows) {
        const alarm = json<AlarmView>(row.alarm);
        yield { ...alarm, severity: severityOf(alarm.type), event: row.kind }; // events stored before severity existed lack it
      }
      if (rows.length < pageSize) return;
      after = Number(rows[rows.length - 1]!.seq);
    }
  }
}
