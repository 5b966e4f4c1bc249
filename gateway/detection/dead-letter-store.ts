import { randomUUID } from 'node:crypto';
import type { ZoneEventRecord } from '../../shared/detection/zone-event.js';
import { detectionDeadLettersStored } from '../../shared/metrics/metrics.js';
import type { Storage } from '../../shared/storage/index.js';
import type { DetectedAlarm, Detections } from './detections.js';

/** What a dead letter holds: one alarm, or one batch's zone events with the webhook triggers they owe. */
export type DeadLetterItem = { alarm: DetectedAlarm } | { zoneEvents: ZoneEventRecord[]; triggered: Detections['triggered'] };

/** A dead letter as the outbox keeps it. */
export interface KeptDeadLetter {
  organizationId: string;
  /** Whose owner retries it after a restart; null: any gateway. */
  buildingId: number | null;
  item: DeadLetterItem;
  error: string;
  failures: number;
  retryAt: number;
}

/** A dead letter read back from the store, now held by this gateway. */
export interface StoredDeadLetter {
  id: string;
  organizationId: string;
  item: DeadLetterItem;
  failures: number;
  retryAt: number;
}

/** Where dead letters outlive the process that set them aside. Every method may reject (the outbox copes). */
export interface DeadLetterStore {
  /** Keeps a new dead letter, held by this gateway; resolves to its id. */
  keep(letter: KeptDeadLetter): Promise<string>;
  /** Records one more refusal (and renews this gateway's hold). */
  refused(id: string, error: string, failures: number, retryAt: number): Promise<void>;
  /** The item is stored at last: the dead letter goes. */
  stored(id: string): Promise<void>;
  /** Renews the holds of this gateway, then takes the dead letters no one holds (or whose holder died) of the buildings it owns. */
  adopt(owns: (buildingId: number | null) => boolean): Promise<StoredDeadLetter[]>;
  /** Lets go of every dead letter this gateway holds (it stops): the next owner retries them at once. */
  release(): Promise<void>;
}

/**
 * How long a gateway holds a dead letter without renewing; a gateway that died without releasing its own leaves
 * them for this long. Renewed by every adoption pass and every retry (at most 5 minutes apart).
 */
const LEASE_S = 600;

interface Row {
  id: string;
  organization_id: string;
  building_id: string | number | null;
  kind: 'alarm' | 'zone_events';
  payload: unknown;
  attempts: number;
  retry_at: string | Date;
}

/**
 * Dead letters in `detection_dead_letters` (migration m0021). Writes bind their values (the payload is jsonb
 * text, the table has no foreign key nor check), so keeping an item cannot be refused for what refused the item.
 * Held through a lease per gateway (`claimed_by`), taken row by row with a conditional update, so two gateways
 * never retry one dead letter. On embedded storage the process is the only one on its data directory (it holds
 * the DATA_DIR lock), so whatever another process held is free at once, even after a crash.
 */
export class StorageDeadLetterStore implements DeadLetterStore {
  private readonly holder = randomUUID();
  /** Which rows no one holds (`?`: this gateway). */
  private readonly free: string;

  constructor(private readonly storage: Storage) {
    this.free = storage.kind === 'embedded' ? 'claimed_by is distinct from ?' : '(claimed_until is null or claimed_until < now())';
  }

  /** The parameters of `free`. */
  private freeParams(): string[] {
    return this.storage.kind === 'embedded' ? [this.holder] : [];
  }

  async keep(letter: KeptDeadLetter): Promise<string> {
    const id = randomUUID();
    const alarm = 'alarm' in letter.item ? letter.item.alarm : undefined;
    await this.storage.executeBound(
      `insert into detection_dead_letters (id, organization_id, building_id, kind, payload, idempotency_key, first_error, last_error, attempts, retry_at, claimed_by, claimed_until)
       values (?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, to_timestamp(? / 1000.0), ?, now() + interval '${LEASE_S} seconds')`,
      [
        id,
        letter.organizationId,
        letter.buildingId,
        alarm ? 'alarm' : 'zone_events',
        JSON.stringify(letter.item),
        alarm?.idempotencyKey ?? null,
        letter.error,
        letter.error,
        letter.failures,
        letter.retryAt,
        this.holder,
      ],
    );
    return id;
  }

  async refused(id: string, error: string, failures: number, retryAt: number): Promise<void> {
    await this.storage.executeBound(
      `update detection_dead_letters set last_error = ?, attempts = ?, retry_at = to_timestamp(? / 1000.0), claimed_by = ?, claimed_until = now() + interval '${LEASE_S} seconds' where id = ?`,
      [error, failures, retryAt, this.holder, id],
    );
  }

  async stored(id: string): Promise<void> {
    await this.storage.executeBound('delete from detection_dead_letters where id = ?', [id]);
  }

  async adopt(owns: (buildingId: number | null) => boolean): Promise<StoredDeadLetter[]> {
    await this.storage.executeBound(
      `update detection_dead_letters set claimed_until = now() + interval '${LEASE_S} seconds' where claimed_by = ?`,
      [this.holder],
    );
    const free = await this.storage.execute<{ id: string; building_id: string | number | null }>(
      `select id, building_id from detection_dead_letters where ${this.free}`,
      this.freeParams(),
    );
    const wanted = free.filter((row) => owns(row.building_id === null ? null : Number(row.building_id))).map((row) => row.id);
    const count = await this.storage.execute<{ count: string | number }>('select count(*) as count from detection_dead_letters');
    detectionDeadLettersStored.set(Number(count[0]?.count ?? 0));
    if (wanted.length === 0) return [];
    // Conditional: a row another gateway took since the read above is not taken again.
    const taken = await this.storage.execute<Row>(
      `update detection_dead_letters set claimed_by = ?, claimed_until = now() + interval '${LEASE_S} seconds'
       where id in (${wanted.map(() => '?').join(', ')}) and ${this.free}
       returning id, organization_id, building_id, kind, payload, attempts, retry_at`,
      [this.holder, ...wanted, ...this.freeParams()],
    );
    return taken.map((row) => ({
      id: row.id,
      organizationId: row.organization_id,
      item: (typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload) as DeadLetterItem,
      failures: row.attempts,
      retryAt: new Date(row.retry_at).getTime(),
    }));
  }

  async release(): Promise<void> {
    await this.storage.executeBound('update detection_dead_letters set claimed_by = null, claimed_until = null where claimed_by = ?', [
      this.holder,
    ]);
  }
}
