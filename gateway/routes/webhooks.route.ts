import { z } from 'zod';
import { ConflictError, NotFoundError, ValidationError } from '../../shared/errors.js';
import { destinationProblem } from '../../shared/webhooks/address-guard.js';
import { WEBHOOK_EVENTS } from '../../shared/webhooks/deliveries.js';
import { generateSecret } from '../../shared/webhooks/signature.js';
import { pageMetadata, paginated, paginationQuery, uuidParam } from '../http/query-schemas.js';
import { defineRoute } from '../http/route.js';
import type { GatewayServices } from '../services.js';
import { presentDelivery, presentWebhook, redactUrl } from '../webhooks/webhook-presenters.js';
import type { WebhookRow } from '../webhooks/webhook-store.js';

const webhookSchema = z.object({
  id: z.uuid(),
  organization_id: z.uuid(),
  url: z.string().describe('The URL with its credentials hidden: userinfo and query values read `***` (deliveries go to the real one)'),
  url_fingerprint: z.string().describe('`sha256:` and 16 hex digits of the real URL: tells two URLs apart without showing them'),
  events: z.array(z.enum(WEBHOOK_EVENTS)),
  building_ids: z
    .array(z.number().int())
    .nullable()
    .describe('Only events of these buildings; null: every building, and events without one'),
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
  events: z
    .array(z.enum(WEBHOOK_EVENTS))
    .min(1)
    .max(WEBHOOK_EVENTS.length)
    .transform((events) => [...new Set(events)]),
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
  attempt_log: z.array(
    z.object({ at: z.string(), response_code: z.number().int().nullable(), error: z.string().nullable(), duration_ms: z.number() }),
  ),
  payload: z.unknown().describe('The body sent: `{type, timestamp, data}`'),
  created_at: z.string(),
  updated_at: z.string(),
});

/**
 * Outbound webhooks (admins): where an organization's alarm, geofence and device events are POSTed, signed the
 * Standard Webhooks way, retried for a day, then dead-lettered; their deliveries can be listed and a dead one
 * sent again. URLs are shown without their credentials (see redactUrl) everywhere but in the 201.
 */
export function webhookRoutes(services: GatewayServices) {
  const { config, webhooks } = services;
  const { store } = webhooks;

  async function load(organizationId: string, id: string): Promise<WebhookRow> {
    const row = await store.find(organizationId, id);
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
      const missing = await store.missingBuildings(organizationId, body.building_ids);
      if (missing.length > 0)
        throw new ValidationError([{ field: 'building_ids', message: `no such building in your organization: ${missing.join(', ')}` }]);
    }
  }

  const params = z.object({ id: uuidParam });
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/webhooks',
      summary:
        'Create a webhook (409 past WEBHOOK_MAX_PER_ORGANIZATION; 422 for a URL that does not lead to public addresses only); the answer holds its signing secret and its URL in full, shown only this once',
      tags: ['webhooks'],
      auth: 'authenticated',
      action: 'webhooks:manage',
      body: z.object({
        url: fields.url,
        events: fields.events,
        building_ids: fields.building_ids.optional(),
        description: fields.description.default(''),
      }),
      response: createdSchema,
      successStatus: 201,
      handler: async ({ principal, body, audit }) => {
        await check(principal.organizationId, body);
        const secret = generateSecret();
        const row = await store.create(principal.organizationId, body, secret, config.WEBHOOK_MAX_PER_ORGANIZATION, audit);
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
        return { body: (await store.list(principal.organizationId)).map(presentWebhook) };
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
        const row = await store.update(principal.organizationId, before, body, audit);
        if (!row) throw new NotFoundError('Webhook');
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
        if (!(await store.delete(principal.organizationId, p.id, audit))) throw new NotFoundError('Webhook');
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
        const { rows, total } = await store.deliveries(p.id, query.status, query.size, query.page * query.size);
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
        const status = await store.deliveryStatus(p.id, p.delivery_id);
        if (!status) throw new NotFoundError('Delivery');
        const row = await store.redeliver(p.id, p.delivery_id, audit);
        if (!row) throw new ConflictError(`Only a dead delivery can be redelivered (this one is ${status})`);
        // Back in the fresh lane, in its place in its alarm's (or device's) order; a failed wake-up is found by the rescue.
        await webhooks.wakeWebhook(p.id, row.organization_id);
        return { status: 202, body: presentDelivery(row) };
      },
    }),
  ];
}
