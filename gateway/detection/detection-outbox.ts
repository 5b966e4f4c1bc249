import { isOutageError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { ZoneEventRecord } from '../../shared/detection/zone-event.js';
import { detectionDeadLettered, detectionDropped } from '../../shared/metrics/metrics.js';
import type { DeadLetterItem, DeadLetterStore } from './dead-letter-store.js';
import type { DetectedAlarm, Detections } from './detections.js';

/** What one batch or one sweep produced for one organization, and how far storing it has got. */
interface OutboxEntry {
  zoneEvents: ZoneEventRecord[];
  /** True once the zone events are committed (with their batch's positions, or by the outbox itself). */
  zoneEventsStored: boolean;
  /** Zone events committed so far, from the first: the outbox stores them in parts (ZONE_EVENTS_PER_STORE). */
  zoneEventsStoredCount: number;
  alarms: DetectedAlarm[];
  triggered: Detections['triggered'];
}

/** One organization's entries, stored in order. */
interface Lane {
  entries: OutboxEntry[];
  draining?: Promise<void>;
  /** Callers waiting for an entry (and so all before it) to be stored: true once it is, false at an outage. */
  waiters: { entry: OutboxEntry; resolve: (stored: boolean) => void }[];
}

/** An item the database refused for a reason other than an outage: set aside, retried with a growing delay. */
interface DeadLetter {
  organizationId: string;
  item: DeadLetterItem;
  failures: number;
  retryAt: number;
  /** Its row in the dead letter store, once kept there. */
  id?: string;
}

export interface OutboxSink {
  storeZoneEvents(zoneEvents: readonly ZoneEventRecord[]): Promise<void>;
  /** Stores one alarm, at most once per key (a retry of a stored one changes nothing), and announces it. */
  raiseAlarm(alarm: DetectedAlarm): Promise<void>;
  /** After everything of an entry is stored: pushes to the other gateways; best effort. */
  announce(entry: Pick<OutboxEntry, 'zoneEvents' | 'triggered'>): Promise<void>;
}

/**
 * Lanes drained at once: enough that a slow or refusing organization leaves others room, few enough that a sweep
 * finding alarms of many organizations does not take every database connection from the requests.
 */
const LANES_AT_ONCE = 4;
/**
 * Zone events per store: one entry can hold thousands (a read of a costly building), and on embedded storage one
 * commit holds the only connection, and the event loop, for all of them (about 35 µs each there: 2,000 held it
 * 60-120 ms, and every other tenant's upload waited). Stored in parts of this many, each its own commit, a flood
 * of one tenant's events lets the group commit serve another's write between two parts (position-writer.ts).
 */
export const ZONE_EVENTS_PER_STORE = 250;
/** First retry of a dead letter; each refusal doubles the wait, up to the last. */
const DEAD_LETTER_FIRST_RETRY_MS = 5000;
const DEAD_LETTER_LAST_RETRY_MS = 300_000;
/** How often the store is asked for dead letters no gateway holds (kept before a restart, or by a gateway that left). */
const ADOPT_EVERY_MS = 5000;

/**
 * Detector state advances as positions arrive, whether or not the database takes what the detectors found. So
 * what they found waits here until it is stored: an alarm condition or an enter/exit that happened during an
 * outage is stored once the database is back. Alarms carry an idempotency key, so retrying one whose commit went
 * through but whose answer was lost does not raise it twice.
 *
 * One lane per organization, a few drained side by side, each in order (which keeps the order of each device's
 * events), each stopping at an outage (retried by the next sweep). Alarms are stored one by one, so an item the
 * database refuses for any other reason (one tenant's data) is set aside as a dead letter, logged at error,
 * counted, and retried later with backoff, while its neighbours and every other organization's lane go on.
 * Dead letters wait apart: they do not hold back the acknowledgement of what caused them (`size`).
 *
 * With a `store`, each dead letter is also kept in the database (gateway/detection/dead-letter-store.ts) and
 * deleted once stored, so a restart loses none: the owner of its building takes it back and retries it. If even
 * keeping it is refused, it stays in memory only, logged at error and counted as today.
 */
export class DetectionOutbox {
  private readonly lanes = new Map<string, Lane>();
  private readonly deadLetters: DeadLetter[] = [];
  private retrying?: Promise<void>;
  private dropped = 0;
  private lastAdoption = -Infinity;

  constructor(
    private readonly sink: OutboxSink,
    private readonly logger: Logger,
    /** Entries (and, apart, dead letters) kept at most; past it the oldest is dropped, loudly. */
    private readonly maxEntries = 100_000,
    private readonly clock: () => number = Date.now,
    /** Where dead letters outlive this process; without one they live in memory only. */
    private readonly store?: DeadLetterStore,
  ) {}

  /** Entries waiting to be stored (dead letters not included). */
  get size(): number {
    let size = 0;
    for (const lane of this.lanes.values()) size += lane.entries.length;
    return size;
  }

  /** Entries of these organizations waiting to be stored. */
  sizeOf(organizations: ReadonlySet<string>): number {
    let size = 0;
    for (const organizationId of organizations) size += this.lanes.get(organizationId)?.entries.length ?? 0;
    return size;
  }

  /** Items set aside after a refusal other than an outage, waiting for their next retry. */
  get deadLetterCount(): number {
    return this.deadLetters.length;
  }

  /** Entries and dead letters given up on (over the cap). */
  get droppedEntries(): number {
    return this.dropped;
  }

  add(detections: Detections, zoneEventsStored: boolean): void {
    const byOrganization = new Map<string, OutboxEntry>();
    const entryOf = (organizationId: string) => {
      let entry = byOrganization.get(organizationId);
      if (!entry)
        byOrganization.set(
          organizationId,
          (entry = { zoneEvents: [], zoneEventsStored, zoneEventsStoredCount: 0, alarms: [], triggered: [] }),
        );
      return entry;
    };
    for (const event of detections.zoneEvents) entryOf(event.organizationId).zoneEvents.push(event);
    for (const alarm of detections.alarms) entryOf(alarm.organizationId).alarms.push(alarm);
    for (const trigger of detections.triggered) entryOf(trigger.organizationId).triggered.push(trigger);
    for (const [organizationId, entry] of byOrganization) {
      if (entry.zoneEvents.length === 0) entry.zoneEventsStored = true;
      let lane = this.lanes.get(organizationId);
      if (!lane) this.lanes.set(organizationId, (lane = { entries: [], waiters: [] }));
      lane.entries.push(entry);
    }
    if (byOrganization.size > 0) this.enforceCap();
  }

  /**
   * Stores what waits in every lane, or in those of `organizations`; resolves when each is done or stopped at an
   * outage (never rejects).
   */
  async drain(organizations?: ReadonlySet<string>): Promise<void> {
    const waiting = [...this.lanes].filter(([organizationId]) => !organizations || organizations.has(organizationId));
    const worker = async () => {
      for (let next = waiting.shift(); next; next = waiting.shift()) await this.drainLane(...next);
    };
    await Promise.all(Array.from({ length: Math.min(LANES_AT_ONCE, waiting.length) }, worker));
  }

  /**
   * Stores what waits now in the lanes of `organizations`; resolves to true once it is stored (entries added
   * meanwhile are not waited for), false if storing stopped at an outage first. For a caller that reads back what
   * was detected before it (the late path) while detection goes on adding.
   */
  async storedThrough(organizations: ReadonlySet<string>): Promise<boolean> {
    const stored = await Promise.all(
      [...organizations].map((organizationId) => {
        const lane = this.lanes.get(organizationId);
        const entry = lane?.entries.at(-1);
        if (!lane || !entry) return true;
        const done = new Promise<boolean>((resolve) => lane.waiters.push({ entry, resolve }));
        void this.drainLane(organizationId, lane);
        return done;
      }),
    );
    return stored.every(Boolean);
  }

  /** The entry left the lane (stored, or dropped over the cap): whoever waited for it has its answer. */
  private settled(lane: Lane, entry: OutboxEntry): void {
    if (lane.waiters.length === 0) return;
    lane.waiters = lane.waiters.filter((waiter) => {
      if (waiter.entry !== entry) return true;
      waiter.resolve(true);
      return false;
    });
  }

  /**
   * Retries the dead letters whose time has come, oldest first; stops at an outage (never rejects). With `owns`,
   * first takes from the store (every few seconds) the dead letters of the buildings it says this gateway owns
   * that no gateway holds.
   */
  retryDeadLetters(owns?: (buildingId: number | null) => boolean): Promise<void> {
    return (this.retrying ??= this.adopt(owns)
      .then(() => this.retryDue())
      .finally(() => (this.retrying = undefined)));
  }

  /**
   * Lets the next owners of this gateway's stored dead letters retry them at once (it stops). Asks nothing of the
   * database when it holds none, so a stop while PostgreSQL is away does not wait on it for nothing.
   */
  async release(): Promise<void> {
    if (this.deadLetters.some((letter) => letter.id !== undefined)) await this.store?.release();
  }

  private drainLane(organizationId: string, lane: Lane): Promise<void> {
    // One drain per lane at a time; a caller arriving during one also gets what it just added looked at.
    if (lane.draining)
      return lane.draining.then(() => (lane.entries.length > 0 && !lane.draining ? this.drainLane(organizationId, lane) : lane.draining));
    return (lane.draining = this.runLane(lane).finally(() => {
      lane.draining = undefined;
      // Stopped at an outage: what is still waiting is not stored.
      for (const waiter of lane.waiters.splice(0)) waiter.resolve(!lane.entries.includes(waiter.entry));
      if (lane.entries.length === 0 && this.lanes.get(organizationId) === lane) this.lanes.delete(organizationId);
    }));
  }

  private async runLane(lane: Lane): Promise<void> {
    while (lane.entries.length > 0) {
      const entry = lane.entries[0]!;
      // In parts, each committed before the next is tried: an outage resumes after the last part stored, and a
      // refused part is set aside alone (with the entry's triggers, announced once it is stored), so no zone event
      // is stored twice and the parts stored are announced with the entry.
      while (!entry.zoneEventsStored) {
        const from = entry.zoneEventsStoredCount;
        const part =
          from === 0 && entry.zoneEvents.length <= ZONE_EVENTS_PER_STORE
            ? entry.zoneEvents
            : entry.zoneEvents.slice(from, from + ZONE_EVENTS_PER_STORE);
        const stored = await this.attempt(() => this.sink.storeZoneEvents(part), lane.entries.length);
        if (stored === 'outage') return;
        if (stored === 'stored') entry.zoneEventsStoredCount += part.length;
        else {
          await this.setAside({ zoneEvents: part, triggered: entry.triggered }, stored.refused);
          entry.zoneEvents = [...entry.zoneEvents.slice(0, from), ...entry.zoneEvents.slice(from + part.length)];
          entry.triggered = [];
        }
        if (entry.zoneEventsStoredCount >= entry.zoneEvents.length) entry.zoneEventsStored = true;
      }
      while (entry.alarms.length > 0) {
        const alarm = entry.alarms[0]!;
        const stored = await this.attempt(() => this.sink.raiseAlarm(alarm), lane.entries.length);
        if (stored === 'outage') return;
        if (stored !== 'stored') await this.setAside({ alarm }, stored.refused);
        entry.alarms.shift();
      }
      // By identity: the cap may have dropped this very entry meanwhile (the next one is not done).
      const at = lane.entries.indexOf(entry);
      if (at >= 0) lane.entries.splice(at, 1);
      this.settled(lane, entry);
      await this.announce(entry);
    }
  }

  /** Runs one store: 'stored', 'outage' (logged at warn: everything waits), or the refusal (the caller sets it aside). */
  private async attempt(store: () => Promise<void>, waiting: number): Promise<'stored' | 'outage' | { refused: unknown }> {
    try {
      await store();
      return 'stored';
    } catch (error) {
      if (isOutageError(error)) {
        this.logger.warn({ err: error, waiting }, 'database unavailable: detections wait in the outbox');
        return 'outage';
      }
      return { refused: error };
    }
  }

  /** Sets an item aside (`id`: its row, when it was kept already), then keeps it in the store; never rejects. */
  private async setAside(
    item: DeadLetter['item'],
    error: unknown,
    failures = 1,
    organizationId = organizationOf(item),
    id?: string,
  ): Promise<void> {
    detectionDeadLettered['alarm' in item ? 'alarm' : 'zone_events'].inc();
    this.logger.error(
      { err: error, organizationId, ...describe(item), failures },
      'storing a detection failed: set aside as a dead letter, retried later',
    );
    const delay = Math.min(DEAD_LETTER_LAST_RETRY_MS, DEAD_LETTER_FIRST_RETRY_MS * 2 ** (failures - 1));
    const letter: DeadLetter = { organizationId, item, failures, retryAt: this.clock() + delay, id };
    this.deadLetters.push(letter);
    while (this.deadLetters.length > this.maxEntries) {
      const lost = this.deadLetters.shift()!;
      this.dropped++;
      detectionDropped.dead_letters_full.inc();
      this.logger.error(
        { organizationId: lost.organizationId, ...describe(lost.item), failures: lost.failures, keptInStore: lost.id !== undefined },
        'too many dead letters: the oldest is dropped from memory',
      );
    }
    if (!this.store) return;
    const text = error instanceof Error ? error.message : String(error);
    try {
      if (id === undefined)
        letter.id = await this.store.keep({
          organizationId,
          buildingId: buildingOf(item),
          item,
          error: text,
          failures,
          retryAt: letter.retryAt,
        });
      else await this.store.refused(id, text, failures, letter.retryAt);
    } catch (storeError) {
      // Kept in memory all the same (a restart would lose it); the next refusal tries the store again.
      detectionDeadLettered.unkept.inc();
      this.logger.error(
        { err: storeError, organizationId, ...describe(item) },
        'keeping a dead letter in the database failed: it lives in memory only',
      );
    }
  }

  /** Takes, every few seconds, the dead letters of this gateway's buildings that no gateway holds. Never rejects. */
  private async adopt(owns: ((buildingId: number | null) => boolean) | undefined): Promise<void> {
    const now = this.clock();
    if (!this.store || !owns || now - this.lastAdoption < ADOPT_EVERY_MS) return;
    this.lastAdoption = now;
    try {
      const held = new Set(this.deadLetters.map((letter) => letter.id));
      const adopted = (await this.store.adopt(owns)).filter((row) => !held.has(row.id));
      // Retried at once: whatever refused it may have been fixed while no one held it.
      for (const row of adopted) this.deadLetters.push({ ...row, retryAt: Math.min(row.retryAt, now) });
      if (adopted.length > 0) this.logger.info({ deadLetters: adopted.length }, 'dead letters taken from the database: retried now');
    } catch (error) {
      this.logger.warn({ err: error }, 'reading stored dead letters failed: tried again later');
    }
  }

  private async retryDue(): Promise<void> {
    const now = this.clock();
    for (const letter of this.deadLetters.filter((candidate) => candidate.retryAt <= now)) {
      const { item } = letter;
      const stored = await this.attempt(
        () => ('alarm' in item ? this.sink.raiseAlarm(item.alarm) : this.sink.storeZoneEvents(item.zoneEvents)),
        this.deadLetters.length,
      );
      if (stored === 'outage') return;
      const index = this.deadLetters.indexOf(letter);
      if (index >= 0) this.deadLetters.splice(index, 1);
      if (stored !== 'stored') {
        await this.setAside(item, stored.refused, letter.failures + 1, letter.organizationId, letter.id);
        continue;
      }
      if (letter.id !== undefined) {
        await this.store
          ?.stored(letter.id)
          .catch((error) =>
            this.logger.error(
              { err: error, organizationId: letter.organizationId, ...describe(item) },
              'deleting a stored dead letter failed: it will be retried again',
            ),
          );
      }
      if (!('alarm' in item)) await this.announce(item);
    }
  }

  private async announce(entry: Pick<OutboxEntry, 'zoneEvents' | 'triggered'>): Promise<void> {
    await this.sink.announce(entry).catch((error) => this.logger.warn({ err: error }, 'announcing detections failed (they are stored)'));
  }

  /** Past the cap, drops the oldest entry of the longest lane: a flooding organization loses its own first. */
  private enforceCap(): void {
    let size = this.size;
    while (size > this.maxEntries) {
      let longest: [string, Lane] | undefined;
      for (const pair of this.lanes) if (!longest || pair[1].entries.length > longest[1].entries.length) longest = pair;
      const [organizationId, lane] = longest!;
      const lost = lane.entries.shift()!;
      this.settled(lane, lost);
      size--;
      this.dropped++;
      detectionDropped.outbox_full.inc();
      this.logger.error(
        { organizationId, zoneEvents: lost.zoneEvents.length, alarms: lost.alarms.map((alarm) => alarm.idempotencyKey) },
        'detection outbox full: oldest detections dropped',
      );
    }
  }
}

const organizationOf = (item: DeadLetter['item']): string =>
  'alarm' in item ? item.alarm.organizationId : (item.zoneEvents[0]?.organizationId ?? item.triggered[0]?.organizationId ?? '');

const buildingOf = (item: DeadLetter['item']): number | null =>
  'alarm' in item ? (item.alarm.buildingId ?? null) : (item.zoneEvents[0]?.buildingId ?? item.triggered[0]?.event.buildingId ?? null);

const describe = (item: DeadLetter['item']) =>
  'alarm' in item ? { alarm: item.alarm.idempotencyKey } : { zoneEvents: item.zoneEvents.length, triggered: item.triggered.length };
