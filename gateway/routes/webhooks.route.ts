import type { EntityManager } from '@mikro-orm/postgresql';
import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { NotFoundError, ValidationError, ConflictError } from '../../shared/errors.js';
import { destinationProblem } from '../../shared/webhooks/address-guard.js';
import { WEBHOOK_EVENTS } from '../../shared/webhooks/deliveries.js';
import { generateSecret } from '../../shared/webhooks/signature.js';
import { pageMetadata, paginated, paginationQuery, uuidParam } from '../http/query-schemas.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';

const webhookSchema = z.object({
  id: z.uuid(),
  organization_id: z.uuid(),
  url: z.string().describe('The URL with its credentials hidden: userinfo and query values read `***` (deliveries go to the real one)'),
  url_fingerprint: z.string().describe('`sha256:` and 16 hex digits of the real URL: tells two URLs apart without showing them'),
  events: z.array(z.enum(WEBHOOK_EVENTS)),
  building_ids: z.array(z.number().int()).nullable().describe('Only events of these buildings; null: every building, and events without one'),
  description: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});
const createdSchema = webhookSchema.extend({
  url: z.string().describe('The URL as sent: shown here once, then only with its credentials hidden'),
  secret: z.string().describe('Signing secret (Standard Webhooks, `whsec_<base64>`): shown here once, never again'),
});

const urlField = z
  .string()
  .max(2000)
  .refine((value) => URL.canParse(value) && ['http:', 'https:'].includes(new URL(value).protocol), 'an http:// or https:// URL');
const fields = {
  url: urlField,
  events: z.array(z.enum(WEBHOOK_EVENTS)).min(1).max(WEBHOOK_EVENTS.length).transform((events) => [...new Set(events)]),
  building_ids: z.array(z.number().int().positive().max(2_147_483_647)).min(1).max(1000).nullable(),
  description: z.string().max(2000),
};

const deliverySchema = z.object({
  id: z.uuid().describe('Also the `webhook-id` header of every attempt: a receiver dedupes on it'),
  webhook_id: z.uuid(),
  event_type: z.enum(WEBHOOK_EVENTS),
  status: z.enum(['pending', 'succeeded', 'dead']),
  attempts: z.number().int(),
  last_response_code: z.number().int().nullable(),
  last_error: z.string().nullable(),
  next_attempt_at: z.string().nullable().describe('When the next attempt is due (pending only)'),
  attempt_log: z.array(z.object({ at: z.string(), response_code: z.number().int().nullable(), error: z.string().nullable(), duration_ms: z.number() })),
  payload: z.unknown().describe('The body sent: `{type, timestamp, data}`'),
  created_at: z.string(),
  updated_at: z.string(),
});

interface WebhookRow {
  id: string;
  organization_id: string;
  url: string;
  events: string[] | string;
  building_ids: number[] | string | null;
  description: string;
  created_at: Date | string;
  updated_at: Date | string;
}

const json = <T>(value: T | string): T => (typeof value === 'string' ? (JSON.parse(value) as T) : value);
const iso = (value: Date | string) => new Date(value).toISOString();

/**
 * Receivers often take their credential in the URL (userinfo, a `token` query value): the API and the audit log
 * show it without them, and a fingerprint of the whole URL tells two of them apart.
 */
export function redactUrl(value: string): string {
  const url = new URL(value);
  const userinfo = url.username || url.password ? '***@' : '';
  const query = url.search ? `?${url.search.slice(1).split('&').map((pair) => (pair.includes('=') ? `${pair.slice(0, pair.indexOf('='))}=***` : pair)).join('&')}` : '';
  return `${url.protocol}//${userinfo}${url.host}${url.pathname}${query}${url.hash ? '#***' : ''}`;
}

export const urlFingerprint = (value: string) => `sha256:${createHash('sha256').update(value).digest('hex').slice(0, 16)}`;

const presentWebhook = (row: WebhookRow) => ({
  id: row.id,
  organization_id: row.organization_id,
  url: redactUrl(row.url),
  url_fingerprint: urlFingerprint(row.url),
  events: json(row.events),
  building_ids: row.building_ids === null ? null : json(row.building_ids),
  description: row.description,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

const presentDelivery = (row: Record<string, any>) => ({
  id: row.id,
  webhook_id: row.webhook_id,
  event_type: row.event_type,
  status: row.status,
  attempts: row.attempts,
  last_response_code: row.last_response_code,
  last_error: row.last_error,
  next_attempt_at: row.status === 'pending' ? iso(row.next_attempt_at) : null,
  attempt_log: json(row.attempt_log),
  payload: JSON.parse(row.payload),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

const COLUMNS = 'id, organization_id, url, events, building_ids, description, created_at, updated_at';

/**
 * Outbound webhooks (admins): where an organization's alarm, geofence and device events are POSTed, signed the
 * Standard Webhooks way, retried for a day, then dead-lettered; their deliveries can be listed and a dead one
 * sent again. URLs are shown without their credentials (see redactUrl) everywhere but in the 201.
 */
export function webhookRoutes(services: GatewayServices) {
  const { storage, config, webhooks } = services;

  async function load(organizationId: string, id: string): Promise<WebhookRow> {
    const [row] = await storage.execute<WebhookRow>(`select ${COLUMNS} from webhooks where id = ? and organization_id = ?`, [id, organizationId]);
    if (!row) throw new NotFoundError('Webhook');
    return row;
  }

  /** 422 for a URL that does not lead to public addresses only (checked again at every delivery) and for buildings of another organization. */
  async function check(organizationId: string, body: { url?: string; building_ids?: number[] | null }): Promise<void> {
    if (body.url !== undefined) {
      const problem = await destinationProblem(new URL(body.url), config.WEBHOOK_ALLOW_PRIVATE_ADDRESSES);
      if (problem) throw new ValidationError([{ field: 'url', message: problem }]);
    }
    if (body.building_ids) {
      const found = await storage.execute<{ id: number }>(`select id from buildings where organization_id = ? and id in (${body.building_ids.map(() => '?').join(', ')})`, [
        organizationId,
        ...body.building_ids,
      ]);
      const known = new Set(found.map((row) => row.id));
      const missing = body.building_ids.filter((id) => !known.has(id));
      if (missing.length > 0) throw new ValidationError([{ field: 'building_ids', message: `no such building in your organization: ${missing.join(', ')}` }]);
    }
  }

  /** A write's statements and its audit entry, in one transaction. */
  const transaction = <T>(run: (execute: <R>(sql: string, values: unknown[]) => Promise<R[]>, tx: EntityManager) => Promise<T>): Promise<T> =>
    storage.em().transactional((tx) => run(<R>(sql: string, values: unknown[]) => tx.execute(sql, values) as Promise<R[]>, tx as EntityManager));

  const params = z.object({ id: uuidParam });
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/webhooks',
      summary: 'Create a webhook (409 past WEBHOOK_MAX_PER_ORGANIZATION; 422 for a URL that does not lead to public addresses only); the answer holds its signing secret and its URL in full, shown only this once',
      tags: ['webhooks'],
      auth: 'authenticated',
      action: 'webhooks:manage',
      body: z.object({ url: fields.url, events: fields.events, building_ids: fields.building_ids.optional(), description: fields.description.default('') }),
      response: createdSchema,
      successStatus: 201,
      handler: async ({ principal, body, audit }) => {
        await check(principal.organizationId, body);
        const secret = generateSecret();
        const row = await transaction(async (execute, tx) => {
          // The organization's row lock serialises its creates, so the cap holds under concurrent requests.
          await execute('select id from organizations where id = ? for update', [principal.organizationId]);
          const [{ count }] = (await execute<{ count: number }>('select count(*)::int as count from webhooks where organization_id = ?', [principal.organizationId])) as [{ count: number }];
          if (count >= config.WEBHOOK_MAX_PER_ORGANIZATION) {
            throw new ConflictError(`An organization may have at most ${config.WEBHOOK_MAX_PER_ORGANIZATION} webhooks; delete one first`);
          }
          const [created] = await execute<WebhookRow>(
            `insert into webhooks (id, organization_id, url, events, building_ids, description, secret) values (?, ?, ?, ?::jsonb, ?::jsonb, ?, ?) returning ${COLUMNS}`,
            [randomUUID(), principal.organizationId, body.url, JSON.stringify(body.events), body.building_ids ? JSON.stringify(body.building_ids) : null, body.description, secret],
          );
          // The log never holds the secret: the presented webhook has none.
          await audit.record(tx, { objectType: 'webhooks', objectId: created!.id, before: null, after: presentWebhook(created!) });
          return created!;
        });
        return { status: 201, body: { ...presentWebhook(row), url: row.url, secret } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/webhooks',
      summary: 'Webhooks of the organization',
      tags: ['webhooks'],
      auth: 'authenticated',
      action: 'webhooks:manage',
      response: z.array(webhookSchema),
      handler: async ({ principal }) => {
        const rows = await storage.execute<WebhookRow>(`select ${COLUMNS} from webhooks where organization_id = ? order by created_at, id`, [principal.organizationId]);
        return { body: rows.map(presentWebhook) };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/webhooks/:id',
      summary: 'One webhook (without its secret)',
      tags: ['webhooks'],
      auth: 'authenticated',
      action: 'webhooks:manage',
      params,
      response: webhookSchema,
      handler: async ({ principal, params: p }) => ({ body: presentWebhook(await load(principal.organizationId, p.id)) }),
    }),
    defineRoute({
      method: 'PATCH',
      path: '/api/v1/webhooks/:id',
      summary: 'Change a webhook (only the fields sent); deliveries already queued keep their payload',
      tags: ['webhooks'],
      auth: 'authenticated',
      action: 'webhooks:manage',
      params,
      body: z.object(fields).partial(),
      response: webhookSchema,
      handler: async ({ principal, params: p, body, audit }) => {
        const before = await load(principal.organizationId, p.id);
        // A client that sends back the webhook as read (URL redacted) keeps the URL it has.
        if (body.url !== undefined && body.url === redactUrl(before.url) && body.url !== before.url) delete body.url;
        await check(principal.organizationId, body);
        const sets: string[] = [];
        const values: unknown[] = [];
        if (body.url !== undefined) sets.push('url = ?'), values.push(body.url);
        if (body.events !== undefined) sets.push('events = ?::jsonb'), values.push(JSON.stringify(body.events));
        if (body.building_ids !== undefined) sets.push('building_ids = ?::jsonb'), values.push(body.building_ids === null ? null : JSON.stringify(body.building_ids));
        if (body.description !== undefined) sets.push('description = ?'), values.push(body.description);
        const row = await transaction(async (execute, tx) => {
          const [updated] = await execute<WebhookRow>(
            `update webhooks set ${[...sets, 'updated_at = now()'].join(', ')} where id = ? and organization_id = ? returning ${COLUMNS}`,
            [...values, p.id, principal.organizationId],
          );
          if (!updated) throw new NotFoundError('Webhook');
          const sent = body.url === undefined ? body : { ...body, url: redactUrl(body.url) };
          await audit.record(tx, { objectType: 'webhooks', objectId: p.id, before: presentWebhook(before), after: presentWebhook(updated), sent });
          return updated;
        });
        return { body: presentWebhook(row) };
      },
    }),
    defineRoute({
      method: 'DELETE',
      path: '/api/v1/webhooks/:id',
      summary: 'Delete a webhook and its deliveries (pending ones are not sent)',
      tags: ['webhooks'],
      auth: 'authenticated',
      action: 'webhooks:manage',
      params,
      handler: async ({ principal, params: p, audit }) => {
        await transaction(async (execute, tx) => {
          const [deleted] = await execute<WebhookRow>(`delete from webhooks where id = ? and organization_id = ? returning ${COLUMNS}`, [p.id, principal.organizationId]);
          if (!deleted) throw new NotFoundError('Webhook');
          await audit.record(tx, { objectType: 'webhooks', objectId: p.id, before: presentWebhook(deleted), after: null });
        });
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/webhooks/:id/deliveries',
      summary: "A webhook's deliveries, newest first, with their attempts (paginated)",
      tags: ['webhooks'],
      auth: 'authenticated',
      action: 'webhooks:manage',
      params,
      query: z.object({ status: z.enum(['pending', 'succeeded', 'dead']).optional(), ...paginationQuery }),
      response: paginated(deliverySchema),
      handler: async ({ principal, params: p, query }) => {
        await load(principal.organizationId, p.id);
        const where = `webhook_id = ?${query.status ? ' and status = ?' : ''}`;
        const values: unknown[] = query.status ? [p.id, query.status] : [p.id];
        const [{ total }] = (await storage.execute<{ total: number }>(`select count(*)::int as total from webhook_deliveries where ${where}`, values)) as [{ total: number }];
        const rows = await storage.execute(`select * from webhook_deliveries where ${where} order by seq desc limit ? offset ?`, [...values, query.size, query.page * query.size]);
        return { body: { data: rows.map(presentDelivery), metadata: pageMetadata(query, total, rows.length) } };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/webhooks/:id/deliveries/:delivery_id/redeliver',
      summary: 'Send a dead-lettered delivery again, with a fresh retry schedule (409 unless it is dead)',
      tags: ['webhooks'],
      auth: 'authenticated',
      action: 'webhooks:manage',
      params: z.object({ id: uuidParam, delivery_id: uuidParam }),
      response: deliverySchema,
      successStatus: 202,
      handler: async ({ principal, params: p, audit }) => {
        await load(principal.organizationId, p.id);
        const [current] = await storage.execute<{ status: string }>('select status from webhook_deliveries where id = ? and webhook_id = ?', [p.delivery_id, p.id]);
        if (!current) throw new NotFoundError('Delivery');
        const row = await transaction(async (execute, tx) => {
          const [redelivered] = await execute<Record<string, any>>(
            `update webhook_deliveries set status = 'pending', attempts = 0, next_attempt_at = now(), sending_until = null, job_token = null, updated_at = now()
             where id = ? and webhook_id = ? and status = 'dead' returning *`,
            [p.delivery_id, p.id],
          );
          if (!redelivered) throw new ConflictError(`Only a dead delivery can be redelivered (this one is ${current.status})`);
          await audit.record(tx, { objectType: 'webhook_deliveries', objectId: p.delivery_id, before: { status: 'dead' }, after: { status: 'pending' } });
          return redelivered;
        });
        // Back in the fresh lane, in its place in its alarm's (or device's) order; a failed wake-up is found by the rescue.
        await webhooks.wakeWebhook(p.id, row.organization_id);
        return { status: 202, body: presentDelivery(row) };
      },
    }),
  ];
}
