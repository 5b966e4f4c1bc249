import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { Bus } from '../bus-channels.js';
import type { ZoneEventRecord } from '../../shared/detection/zone-event.js';
import { ConflictError, NotFoundError, ValidationError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { Storage } from '../../shared/storage/index.js';
import type { Enqueued, WebhookEvent, WebhookEventType } from '../../shared/webhooks/deliveries.js';
import type { AuditRecorder } from '../audit/audit-log.js';
import type { Principal } from '../auth/principal.js';
import type { BuildingRegistry, BuildingRuntime } from '../realtime/building-registry.js';
import type { RealtimeService } from '../realtime/realtime-service.js';
import { EvacuationStore, type Actor, type EvacuationRow, type StoredEntry } from './evacuation-store.js';
import { presentEntry, presentSummary, type PresentedEntry } from './presenters.js';
import { countRoll, type RollStatus } from '../../shared/evacuations/roll-counts.js';
import { orderMissing, personKeyOf, rollAtDeclaration, type Fix, type MusterPoint } from './roll.js';

/** One change of an evacuation: started, ended, or one roll entry changed (with its seq). */
export interface EvacuationChange {
  organizationId: string;
  buildingId: number;
  evacuationId: string;
  kind: 'started' | 'ended' | 'entry';
  evacuation?: ReturnType<typeof presentSummary>;
  entry?: PresentedEntry;
}

/** A device whose newest fix is older than this is not looked at for "last fix inside" (a week-old fix says little). */
const LAST_FIX_LOOKBACK_MS = 24 * 3600_000;
/** How often each gateway reads the active evacuations again (a bus message it missed, an assembly point added). */
const REFRESH_MS = 5000;

interface Active {
  evacuation: EvacuationRow;
  points: Map<string, MusterPoint>;
  /** People on the roll, so that an arrival is told from someone already listed without a read. */
  onRoll: Set<string>;
}

export interface DeclareInput {
  floor_ids?: number[];
  note?: string | null;
  drill?: boolean;
}

const actorOf = (principal: Principal): Actor => ({ user_id: principal.userId, email: principal.email });

/** What webhooks need of evacuations (gateway/webhooks/webhook-service.ts): deliveries stored with the change, woken after. */
export interface EvacuationWebhooks {
  stored(tx: EntityManager, events: readonly WebhookEvent[]): Promise<Enqueued>;
  committed(enqueued: Enqueued): Promise<void>;
}

/** The webhook event of a change; none for a drill, which pages nobody. Keyed by the change, so a retry stores one delivery. */
function webhookEvent(evacuation: EvacuationRow, type: WebhookEventType, key: string, data: Record<string, unknown>): WebhookEvent[] {
  if (evacuation.drill) return [];
  const timestamp = new Date().toISOString();
  return [
    {
      organizationId: evacuation.organizationId,
      buildingId: evacuation.buildingId,
      type,
      key: `evacuation:${evacuation.id}:${key}`,
      orderKey: `evacuation:${evacuation.id}`,
      timestamp,
      data,
    },
  ];
}

const personSafe = (evacuation: EvacuationRow, entry: StoredEntry) =>
  webhookEvent(evacuation, 'evacuation.person_safe', `safe:${entry.personKey}`, {
    evacuation_id: evacuation.id,
    building_id: evacuation.buildingId,
    entry: presentEntry(entry),
  });

/**
 * Evacuations of buildings and their rolls. The roll lives in the database, written as it changes, so any
 * gateway serves it and a restart keeps it; each change is announced on the bus (`evacuations`) once stored.
 * People reaching an assembly point are marked by the building's owner (gateway/evacuations/muster-detection.ts
 * feeds `reachedPoint` from the zone enter events); every gateway holds the list of active evacuations to match.
 */
export class EvacuationService {
  readonly store: EvacuationStore;
  private readonly active = new Map<number, Active>();
  /** The interest in the live positions of each building under evacuation, from every gateway (arrivals). */
  private readonly followed = new Map<number, Promise<(lingerMs?: number) => void>>();
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly storage: Storage,
    private readonly registry: BuildingRegistry,
    /** The live state, and the bus interest in evacuated buildings' positions (their owner marks arrivals from them). */
    private readonly realtime: Pick<RealtimeService, 'live' | 'interest'>,
    private readonly bus: Bus,
    private readonly logger: Logger,
    private readonly presenceWindowMs: number,
    /** Webhook deliveries of evacuation.started, .person_safe and .ended, stored with each change. */
    private readonly webhooks?: EvacuationWebhooks,
    private readonly now: () => number = Date.now,
  ) {
    this.store = new EvacuationStore(storage);
  }

  async start(): Promise<void> {
    await this.bus.subscribe('evacuations', (change) => {
      if (change.kind !== 'entry') void this.refresh();
    });
    this.bus.onResync(() => void this.refresh());
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), REFRESH_MS).unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * Receives the live positions of every building under evacuation, whichever gateway they were uploaded to: the
   * building's owner marks arrivals from them (muster-detection.ts). Evacuations are few; every gateway follows them.
   */
  private followActive(): void {
    for (const buildingId of this.active.keys()) {
      if (this.followed.has(buildingId)) continue;
      const held = this.realtime.interest.holdBuildings([buildingId]);
      this.followed.set(buildingId, held);
      held.catch((error: unknown) => {
        this.logger.warn(
          { err: error, buildingId },
          'subscribing to an evacuated building’s positions failed; retried at the next refresh',
        );
        if (this.followed.get(buildingId) === held) this.followed.delete(buildingId);
      });
    }
    for (const [buildingId, held] of this.followed) {
      if (this.active.has(buildingId)) continue;
      this.followed.delete(buildingId);
      void held.then(
        (release) => release(),
        () => undefined,
      );
    }
  }

  /** Reads the active evacuations (with their assembly points and people) again. */
  async refresh(): Promise<void> {
    try {
      const rows = await this.store.allActive();
      const seen = new Set<number>();
      for (const evacuation of rows) {
        seen.add(evacuation.buildingId);
        const points = await this.store.musterPoints(evacuation.organizationId, evacuation.buildingId);
        const held = this.active.get(evacuation.buildingId);
        const onRoll =
          held?.evacuation.id === evacuation.id
            ? held.onRoll
            : new Set((await this.store.roll(evacuation.id)).map((entry) => entry.personKey));
        this.active.set(evacuation.buildingId, { evacuation, points: new Map(points.map((point) => [point.id, point])), onRoll });
      }
      for (const buildingId of this.active.keys()) if (!seen.has(buildingId)) this.active.delete(buildingId);
      this.followActive();
    } catch (error) {
      this.logger.warn({ err: error }, 'reading the active evacuations failed');
    }
  }

  /** A roll change in one transaction with the webhook deliveries it owes (returned by `work`), woken once committed. */
  private async write<T>(work: (tx: EntityManager) => Promise<{ result: T; owed: WebhookEvent[] }>): Promise<T> {
    let enqueued: Enqueued | undefined;
    const result = await this.storage.em().transactional(async (tx) => {
      const { result, owed } = await work(tx as EntityManager);
      if (owed.length > 0 && this.webhooks) enqueued = await this.webhooks.stored(tx as EntityManager, owed);
      return result;
    });
    if (enqueued)
      await this.webhooks!.committed(enqueued).catch((error) => this.logger.warn({ err: error }, 'waking evacuation webhooks failed'));
    return result;
  }

  private async building(principal: Principal, buildingId: number): Promise<BuildingRuntime> {
    const runtime = await this.registry.get(principal.organizationId, buildingId);
    if (!runtime) throw new NotFoundError('Building');
    return runtime;
  }

  async declare(principal: Principal, buildingId: number, input: DeclareInput, audit: AuditRecorder): Promise<EvacuationRow> {
    const runtime = await this.building(principal, buildingId);
    const unknown = (input.floor_ids ?? []).filter((floorId) => !runtime.floors.has(floorId));
    if (unknown.length > 0)
      throw new ValidationError([{ field: 'floor_ids', message: `not floors of building ${buildingId}: ${unknown.join(', ')}` }]);
    const organizationId = principal.organizationId;
    const existing = await this.store.active(organizationId, buildingId);
    if (existing) throw conflict(existing);
    const now = this.now();
    const points = await this.store.musterPoints(organizationId, buildingId);
    const roll = rollAtDeclaration({
      buildingId,
      recentInside: await this.store.recentInside(organizationId, buildingId, new Date(now - this.presenceWindowMs)),
      latest: await this.store.latest(organizationId, new Date(now - LAST_FIX_LOOKBACK_MS)),
      floorIds: input.floor_ids?.length ? new Set(input.floor_ids) : null,
      points,
      toCartesian: (fix) => {
        const { x, y } = runtime.transform.toCartesian({ lat: fix.lat, lng: fix.lng });
        return [x, y];
      },
      now,
    });
    const evacuation: EvacuationRow = {
      id: randomUUID(),
      organizationId,
      buildingId,
      floorIds: input.floor_ids?.length ? [...new Set(input.floor_ids)].sort((a, b) => a - b) : null,
      note: input.note ?? null,
      drill: input.drill ?? false,
      startedAt: new Date(now),
      startedBy: actorOf(principal),
      endedAt: null,
      endedBy: null,
    };
    try {
      await this.write(async (tx) => {
        await this.store.insert(tx, evacuation, roll);
        const after = { ...presentSummary(evacuation), on_roll: roll.length };
        await audit.record(tx, { objectType: 'evacuations', objectId: evacuation.id, before: null, after });
        return {
          result: undefined,
          owed: webhookEvent(evacuation, 'evacuation.started', 'started', { ...after, counts: countRoll(roll) }),
        };
      });
    } catch (error) {
      // Declared meanwhile by someone else (the partial unique index holds one active per building).
      if (error instanceof UniqueConstraintViolationException) {
        const winner = await this.store.active(organizationId, buildingId);
        if (winner) throw conflict(winner);
      }
      throw error;
    }
    this.active.set(buildingId, {
      evacuation,
      points: new Map(points.map((point) => [point.id, point])),
      onRoll: new Set(roll.map((entry) => entry.personKey)),
    });
    this.followActive();
    await this.announce({
      organizationId,
      buildingId,
      evacuationId: evacuation.id,
      kind: 'started',
      evacuation: presentSummary(evacuation),
    });
    return evacuation;
  }

  /** An evacuation of the caller's building: `current` names the active one. */
  async find(principal: Principal, buildingId: number, id: string): Promise<EvacuationRow> {
    await this.building(principal, buildingId);
    const found =
      id === 'current'
        ? await this.store.active(principal.organizationId, buildingId)
        : await this.store.find(principal.organizationId, buildingId, id);
    if (!found) throw new NotFoundError(id === 'current' ? 'Active evacuation' : 'Evacuation');
    return found;
  }

  async end(principal: Principal, buildingId: number, id: string, audit: AuditRecorder): Promise<EvacuationRow> {
    const found = await this.find(principal, buildingId, id);
    if (found.endedAt) throw new ConflictError(`Evacuation ${found.id} ended at ${found.endedAt.toISOString()}`);
    const at = new Date(this.now());
    const ended: EvacuationRow = { ...found, endedAt: at, endedBy: actorOf(principal) };
    const settled = await this.write(async (tx) => {
      const entries = await this.store.end(tx, found.id, ended.endedBy!, at);
      await audit.record(tx, {
        objectType: 'evacuations',
        objectId: found.id,
        before: presentSummary(found),
        after: presentSummary(ended),
      });
      const counts = countRoll(await this.store.roll(found.id, 0, tx));
      return { result: entries, owed: webhookEvent(ended, 'evacuation.ended', 'ended', { ...presentSummary(ended), counts }) };
    });
    this.active.delete(buildingId);
    this.followActive();
    for (const entry of settled) await this.announceEntry(ended, entry);
    await this.announce({
      organizationId: found.organizationId,
      buildingId,
      evacuationId: found.id,
      kind: 'ended',
      evacuation: presentSummary(ended),
    });
    return ended;
  }

  /** A warden marks someone on the roll safe (404 when they are not on it); someone safe already stays as they were. */
  async markSafe(
    principal: Principal,
    buildingId: number,
    id: string,
    personKey: string,
    comment: string | null,
    audit: AuditRecorder,
  ): Promise<StoredEntry> {
    const evacuation = await this.find(principal, buildingId, id);
    if (evacuation.endedAt) throw new ConflictError(`Evacuation ${evacuation.id} has ended`);
    const result = await this.write(async (tx) => {
      const before = await this.store.entry(evacuation.id, personKey, tx);
      if (!before) throw new NotFoundError('Person on the roll');
      const after = await this.store.markSafe(tx, evacuation.id, personKey, actorOf(principal), comment, new Date(this.now()));
      await audit.record(tx, {
        objectType: 'evacuation_roll',
        objectId: `${evacuation.id}/${personKey}`,
        before: presentEntry(before),
        after: presentEntry(after ?? before),
      });
      return { result: { entry: after ?? before, changed: after !== undefined }, owed: after ? personSafe(evacuation, after) : [] };
    });
    if (result.changed) await this.announceEntry(evacuation, result.entry);
    return result.entry;
  }

  /**
   * The roll as it stands, with counts. The missing carry their last known place: the newest fix of any of their
   * devices, from this gateway's live state or else storage (after a restart the live state is empty). `statuses`
   * narrows `roll` and `arrivals` to those statuses (the counts and the missing stay whole).
   */
  async view(evacuation: EvacuationRow, statuses?: readonly RollStatus[]) {
    const entries = (await this.store.roll(evacuation.id)).sort((a, b) => (a.personKey < b.personKey ? -1 : 1));
    const runtime = this.registry.peek(evacuation.buildingId);
    const stillMissing = entries.filter((entry) => !entry.arrival && entry.status === 'missing');
    const stored = await this.store.latestOf(
      evacuation.organizationId,
      stillMissing.flatMap((entry) => entry.deviceIds),
      evacuation.startedAt,
    );
    const missing = orderMissing(
      stillMissing.map((entry) => this.withNewestFix(evacuation.organizationId, entry, stored)),
      (floorId) => runtime?.floors.get(floorId)?.level,
    );
    const wanted = statuses && new Set(statuses);
    const listed = (entry: StoredEntry) => !wanted || wanted.has(entry.status);
    return {
      ...presentSummary(evacuation),
      counts: countRoll(entries),
      missing: missing.map(presentEntry),
      roll: entries.filter((entry) => !entry.arrival && listed(entry)).map(presentEntry),
      arrivals: entries.filter((entry) => entry.arrival && listed(entry)).map(presentEntry),
    };
  }

  /**
   * Where a person on the roll was last seen in the building, and the building's assembly points, each placed at
   * its centre on its floor: what a rescue route from the nearest point to the person needs. 404 when the person
   * is not on the roll; 422 when they have no known place on a floor of the building, or it has no assembly point.
   */
  async lastPlace(principal: Principal, buildingId: number, id: string, personKey: string) {
    const evacuation = await this.find(principal, buildingId, id);
    const entry = await this.store.entry(evacuation.id, personKey);
    if (!entry) throw new NotFoundError('Person on the roll');
    const stored = await this.store.latestOf(evacuation.organizationId, entry.deviceIds, evacuation.startedAt);
    const fix = this.withNewestFix(evacuation.organizationId, entry, stored).fix;
    // A fix kept on the roll has no building: it was taken in this one (at the declaration, or as the person moved).
    const elsewhere = fix?.buildingId !== null && fix?.buildingId !== buildingId;
    if (!fix || elsewhere || fix.floorId === null || fix.x === null || fix.y === null)
      throw new ValidationError([{ field: 'entry', message: `${personKey} has no known place on a floor of building ${buildingId}` }]);
    const points = await this.store.musterPoints(evacuation.organizationId, buildingId);
    if (points.length === 0) throw new ValidationError([{ field: 'id', message: `building ${buildingId} has no assembly point` }]);
    return {
      entry: presentEntry({ ...entry, fix }),
      place: { floorId: fix.floorId, x: fix.x, y: fix.y },
      points: points.map((point) => ({ key: { id: point.id, name: point.name }, floorId: point.floorId, ...centreOf(point) })),
    };
  }

  private withNewestFix(organizationId: string, entry: StoredEntry, stored: ReadonlyMap<string, Fix>): StoredEntry {
    let fix = entry.fix;
    for (const deviceId of entry.deviceIds) {
      const record = this.realtime.live.latest(organizationId, deviceId);
      const candidates = [record && fixOfRecord(record), stored.get(deviceId)];
      for (const candidate of candidates) if (candidate && (!fix || candidate.at > fix.at)) fix = candidate;
    }
    return fix === entry.fix ? entry : { ...entry, fix };
  }

  /** Stored roll changes after `sinceSeq` of the building's active (else latest) evacuation, in seq order. */
  async changesSince(
    organizationId: string,
    buildingId: number,
    sinceSeq: number,
  ): Promise<{ evacuation: EvacuationRow; entries: StoredEntry[] } | undefined> {
    const evacuation = await this.store.active(organizationId, buildingId);
    if (!evacuation) return undefined;
    return { evacuation, entries: await this.store.roll(evacuation.id, sinceSeq) };
  }

  /** A zone enter the building's owner stored: a person on the roll reaching an assembly point is safe. */
  async reachedPoint(event: ZoneEventRecord): Promise<void> {
    const held = this.active.get(event.buildingId);
    if (!held || held.evacuation.organizationId !== event.organizationId || event.type !== 'enter') return;
    const point = held.points.get(event.zoneId);
    if (!point || event.at < held.evacuation.startedAt.getTime()) return;
    const record = this.realtime.live.latest(event.organizationId, event.deviceId);
    const entry = await this.write(async (tx) => {
      const marked = await this.store.reachedPoint(
        tx,
        held.evacuation.id,
        personKeyOf(event),
        point,
        new Date(event.at),
        record ? fixOfRecord(record) : null,
      );
      return { result: marked, owed: marked ? personSafe(held.evacuation, marked) : [] };
    });
    if (entry) await this.announceEntry(held.evacuation, entry);
  }

  /** Positions of the building's owner: someone not on the roll coming into an evacuated building is an arrival. */
  async positions(records: readonly PositionRecord[], owns: (buildingId: number) => boolean): Promise<void> {
    if (this.active.size === 0) return;
    const byEvacuation = new Map<Active, Map<string, StoredEntry>>();
    for (const record of records) {
      const held = record.buildingId === null ? undefined : this.active.get(record.buildingId);
      if (!held || held.evacuation.organizationId !== record.organizationId || !owns(held.evacuation.buildingId)) continue;
      if (record.timestamp < held.evacuation.startedAt.getTime()) continue;
      const key = personKeyOf(record);
      if (held.onRoll.has(key)) continue;
      held.onRoll.add(key);
      const fix = fixOfRecord(record);
      const arrivals = byEvacuation.get(held) ?? new Map<string, StoredEntry>();
      byEvacuation.set(held, arrivals);
      const entry: StoredEntry = {
        personKey: key,
        userId: record.userId,
        deviceIds: [record.deviceId],
        arrival: true,
        status: 'missing',
        statusAt: record.receivedAt,
        pointId: null,
        pointName: null,
        fix,
        markedBy: null,
        comment: null,
        seq: 0,
      };
      arrivals.set(key, entry);
    }
    for (const [held, arrivals] of byEvacuation) {
      for (const entry of await this.store.addArrivals(held.evacuation.id, [...arrivals.values()]))
        await this.announceEntry(held.evacuation, entry);
    }
  }

  private announceEntry(evacuation: EvacuationRow, entry: StoredEntry): Promise<void> {
    return this.announce({
      organizationId: evacuation.organizationId,
      buildingId: evacuation.buildingId,
      evacuationId: evacuation.id,
      kind: 'entry',
      entry: presentEntry(entry),
    });
  }

  private async announce(change: EvacuationChange): Promise<void> {
    await this.bus
      .publish('evacuations', change)
      .catch((error) => this.logger.warn({ err: error, evacuation: change.evacuationId }, 'announcing an evacuation change failed'));
  }
}

function conflict(active: EvacuationRow): ConflictError {
  return new ConflictError(`Building ${active.buildingId} has an active evacuation: ${active.id}`, {
    location: `/api/v1/buildings/${active.buildingId}/evacuations/${active.id}`,
  });
}

/** The centre of an assembly point: a circle's centre, a polygon's vertex mean (its closing vertex counted once). */
function centreOf(point: MusterPoint): { x: number; y: number } {
  const vertices = point.cartesians;
  if (point.type === 'CIRCLE' || vertices.length === 1) return { x: vertices[0]![0], y: vertices[0]![1] };
  const [first, last] = [vertices[0]!, vertices[vertices.length - 1]!];
  const ring = first[0] === last[0] && first[1] === last[1] ? vertices.slice(0, -1) : vertices;
  return { x: ring.reduce((sum, [x]) => sum + x, 0) / ring.length, y: ring.reduce((sum, [, y]) => sum + y, 0) / ring.length };
}

const fixOfRecord = (record: PositionRecord): Fix => ({
  deviceId: record.deviceId,
  userId: record.userId,
  buildingId: record.buildingId,
  floorId: record.floorId,
  x: record.x,
  y: record.y,
  lat: record.lat,
  lng: record.lng,
  at: record.timestamp,
});
