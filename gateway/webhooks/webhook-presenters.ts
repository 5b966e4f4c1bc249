import { createHash } from 'node:crypto';
import type { DeliveryRow, WebhookRow } from './webhook-store.js';

const json = <T>(value: T | string): T => (typeof value === 'string' ? (JSON.parse(value) as T) : value);
const iso = (value: Date | string) => new Date(value).toISOString();

/**
 * Receivers often take their credential in the URL (userinfo, a `token` query value): the API and the audit log
 * show it without them, and a fingerprint of the whole URL tells two of them apart.
 */
export function redactUrl(value: string): string {
  const url = new URL(value);
  const userinfo = url.username || url.password ? '***@' : '';
  const query = url.search
    ? '?' +
      url.search
        .slice(1)
        .split('&')
        .map((pair) => (pair.includes('=') ? `${pair.slice(0, pair.indexOf('='))}=***` : pair))
        .join('&')
    : '';
  return `${url.protocol}//${userinfo}${url.host}${url.pathname}${query}${url.hash ? '#***' : ''}`;
}

export const urlFingerprint = (value: string) => `sha256:${createHash('sha256').update(value).digest('hex').slice(0, 16)}`;

/** A webhook as the API and the audit log show it: never its secret, its URL without credentials. */
export const presentWebhook = (row: WebhookRow) => ({
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

export const presentDelivery = (row: DeliveryRow) => ({
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
