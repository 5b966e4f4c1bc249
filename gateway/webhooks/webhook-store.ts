import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ConflictError } from '../../shared/errors.js';
import type { Storage } from '../../shared/storage/index.js';
import type { AuditRecorder } from '../audit/audit-log.js';
import { presentWebhook, redactUrl } from './webhook-presenters.js';

export interface WebhookRow {
  id: string;
  organization_id: string;
  url: string;
  events: string[] | string;
  building_ids: number[] | string | null;
  description: string;
  created_at: Date | string;
  updated_at: Date | string;
}

/** A `webhook_deliveries` row as stored (`select *`). */
// biome-ignore lint/suspicious/noExplicitAny: a delivery row as read, by column; presentDelivery picks and types its fields
export type DeliveryRow = Record<string, any>;

export interface WebhookInput {
  url: string;
  events: string[];
  building_ids?: number[] | null;
  description: string;
}

type Execute = <R>(sql: string, values: unknown[]) => Promise<R[]>;

const COLUMNS = 'id, organization_id, url, events, building_ids, description, created_at, updated_at';

/** Webhooks and their deliveries as the admin API reads and changes them; every write records its audit entry in its transaction. */
export class WebhookStore {
  constructor(private readonly storage: Storage) {}

  async find(organizationId: string, id: string): Promise<WebhookRow | undefined> {
    const [row] = await this.storage.execute<WebhookRow>(`select ${COLUMNS} from webhooks where id = ? and organization_id = ?`, [
      id,
      organizationId,
    ]);
    return row;
  }

  list(organizationId: string): Promise<WebhookRow[]> {
    return this.storage.execute<WebhookRow>(`select ${COLUMNS} from webhooks where organization_id = ? order by created_at, id`, [
      organizationId,
    ]);
  }

  /** Those of the building ids that are no building of the organization. */
  async missingBuildings(organizationId: string, buildingIds: readonly number[]): Promise<number[]> {
    const found = await this.storage.execute<{ id: number }>(
      `select id from buildings where organization_id = ? and id in (${buildingIds.map(() => '?').join(', ')})`,
      [organizationId, ...buildingIds],
    );
    const known = new Set(found.map((row) => row.id));
    return buildingIds.filter((id) => !known.has(id));
  }

  /** A new webhook; 409 when the organization already has `max` of them. */
  async create(organizationId: string, input: WebhookInput, secret: string, max: number, audit: AuditRecorder): Promise<WebhookRow> {
    return this.transaction(async (execute, tx) => {
      // The organization's row lock serialises its creates, so the cap holds under concurrent requests.
      await execute('select id from organizations where id = ? for update', [organizationId]);
      const [{ count }] = (await execute<{ count: number }>('select count(*)::int as count from webhooks where organization_id = ?', [
        organizationId,
      ])) as [{ count: number }];
      if (count >= max) throw new ConflictError(`An organization may have at most ${max} webhooks; delete one first`);
      const [created] = await execute<WebhookRow>(
        `insert into webhooks (id, organization_id, url, events, building_ids, description, secret)
         values (?, ?, ?, ?::jsonb, ?::jsonb, ?, ?) returning ${COLUMNS}`,
        [
          randomUUID(),
          organizationId,
          input.url,
          JSON.stringify(input.events),
          input.building_ids ? JSON.stringify(input.building_ids) : null,
          input.description,
          secret,
        ],
      );
      // The log never holds the secret: the presented webhook has none.
      await audit.record(tx, { objectType: 'webhooks', objectId: created!.id, before: null, after: presentWebhook(created!) });
      return created!;
    });
  }

  /** Changes the fields given; undefined when the webhook is gone. */
  async update(
    organizationId: string,
    before: WebhookRow,
    changes: Partial<WebhookInput>,
    audit: AuditRecorder,
  ): Promise<WebhookRow | undefined> {
    const sets: string[] = [];
    const values: unknown[] = [];
    if (changes.url !== undefined) sets.push('url = ?'), values.push(changes.url);
    if (changes.events !== undefined) sets.push('events = ?::jsonb'), values.push(JSON.stringify(changes.events));
    if (changes.building_ids !== undefined) {
      sets.push('building_ids = ?::jsonb'), values.push(changes.building_ids === null ? null : JSON.stringify(changes.building_ids));
    }
    if (changes.description !== undefined) sets.push('description = ?'), values.push(changes.description);
    return this.transaction(async (execute, tx) => {
      const [updated] = await execute<WebhookRow>(
        `update webhooks set ${[...sets, 'updated_at = now()'].join(', ')} where id = ? and organization_id = ? returning ${COLUMNS}`,
        [...values, before.id, organizationId],
      );
      if (!updated) return undefined;
      const sent = changes.url === undefined ? changes : { ...changes, url: redactUrl(changes.url) };
      await audit.record(tx, {
        objectType: 'webhooks',
        objectId: before.id,
        before: presentWebhook(before),
        after: presentWebhook(updated),
        sent,
      });
      return updated;
    });
  }

  /** Deletes the webhook, its deliveries with it; false when there was none. */
  async delete(organizationId: string, id: string, audit: AuditRecorder): Promise<boolean> {
    return this.transaction(async (execute, tx) => {
      const [deleted] = await execute<WebhookRow>(`delete from webhooks where id = ? and organization_id = ? returning ${COLUMNS}`, [
        id,
        organizationId,
      ]);
      if (!deleted) return false;
      await audit.record(tx, { objectType: 'webhooks', objectId: id, before: presentWebhook(deleted), after: null });
      return true;
    });
  }

  /** A page of the webhook's deliveries, newest first, and how many there are in all. */
  async deliveries(
    webhookId: string,
    status: string | undefined,
    limit: number,
    offset: number,
  ): Promise<{ rows: DeliveryRow[]; total: number }> {
    const where = `webhook_id = ?${status ? ' and status = ?' : ''}`;
    const values: unknown[] = status ? [webhookId, status] : [webhookId];
    const [{ total }] = (await this.storage.execute<{ total: number }>(
      `select count(*)::int as total from webhook_deliveries where ${where}`,
      values,
    )) as [{ total: number }];
    const rows = await this.storage.execute<DeliveryRow>(
      `select * from webhook_deliveries where ${where} order by seq desc limit ? offset ?`,
      [...values, limit, offset],
    );
    return { rows, total };
  }

  async deliveryStatus(webhookId: string, deliveryId: string): Promise<string | undefined> {
    const [row] = await this.storage.execute<{ status: string }>('select status from webhook_deliveries where id = ? and webhook_id = ?', [
      deliveryId,
      webhookId,
    ]);
    return row?.status;
  }

  /** Puts a dead delivery back in line with a fresh retry schedule; undefined unless it was dead. */
  async redeliver(webhookId: string, deliveryId: string, audit: AuditRecorder): Promise<DeliveryRow | undefined> {
    return this.transaction(async (execute, tx) => {
      const [redelivered] = await execute<DeliveryRow>(
        `update webhook_deliveries
         set status = 'pending', attempts = 0, next_attempt_at = now(), sending_until = null, job_token = null, updated_at = now()
         where id = ? and webhook_id = ? and status = 'dead' returning *`,
        [deliveryId, webhookId],
      );
      if (!redelivered) return undefined;
      await audit.record(tx, {
        objectType: 'webhook_deliveries',
        objectId: deliveryId,
        before: { status: 'dead' },
        after: { status: 'pending' },
      });
      return redelivered;
    });
  }

  /** A write's statements and its audit entry, in one transaction. */
  private transaction<T>(run: (execute: Execute, tx: EntityManager) => Promise<T>): Promise<T> {
    return this.storage
      .em()
      .transactional((tx) => run(<R>(sql: string, values: unknown[]) => tx.execute(sql, values) as Promise<R[]>, tx as EntityManager));
  }
}
