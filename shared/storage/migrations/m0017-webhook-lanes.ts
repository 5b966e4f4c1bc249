import { Migration } from '@mikro-orm/migrations';

/**
 * Webhook deliveries leave the strict line per webhook (shared/webhooks/deliveries.ts). `order_key` names what
 * order is kept for (`alarm:<id>`, `device:<id>`; null: none), `priority` puts `alarm.raised` (0) before the rest
 * (1), and `sending_until` is the lease of the one attempt of a delivery under way. Fresh deliveries
 * (`attempts = 0`) go out one at a time per webhook in (priority, seq) order, skipping any whose key has an
 * earlier delivery still pending; a delivery that failed once is retried on its own schedule (the retry lane).
 */
export class M0017WebhookLanes extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table webhook_deliveries add column order_key text, add column priority smallint not null default 1, add column sending_until timestamptz`,
    );
    this.addSql(`update webhook_deliveries set priority = 0 where event_type = 'alarm.raised'`);
    this.addSql(
      `update webhook_deliveries set order_key = case
         when event_type like 'alarm.%' then 'alarm:' || (payload::jsonb -> 'data' ->> 'id')
         else 'device:' || (payload::jsonb -> 'data' ->> 'device_id') end
       where status = 'pending'`,
    );
    this.addSql(
      `create index webhook_deliveries_fresh_idx on webhook_deliveries (webhook_id, priority, seq) where status = 'pending' and attempts = 0`,
    );
    this.addSql(`create index webhook_deliveries_order_idx on webhook_deliveries (webhook_id, order_key, seq) where status = 'pending'`);
    this.addSql(
      `create index webhook_deliveries_retry_idx on webhook_deliveries (next_attempt_at) where status = 'pending' and attempts > 0`,
    );
    this.addSql(`create index webhook_deliveries_settled_idx on webhook_deliveries (status, updated_at) where status <> 'pending'`);
  }
}
