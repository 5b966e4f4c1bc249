import { z } from 'zod';
import { packageVersion } from '../../shared/version.js';
import { jsonSchema } from '../http/openapi.js';
import { poseSchema } from '../realtime/pose-schema.js';
import { alarmSchema } from '../routes/alarms.route.js';
import { ALARM_EVENT_KINDS } from '../alarms/alarm-event-message.js';
import { featureSchema } from '../routes/realtime.route.js';
import { evacuationSummarySchema, rollEntrySchema } from '../evacuations/presenters.js';

/**
 * The WebSocket protocol at /api/v1/ws, as zod schemas of every frame either side sends: the source of the
 * AsyncAPI document served at /api/v1/asyncapi.json and of the WebSocket contract test. JSON text frames, or
 * the same objects as msgpack binary frames with the `msgpack` subprotocol.
 */
const id = z.unknown().optional().describe('Any value: echoed in the reply to this operation');
const topic = z
  .string()
  .describe(
    'buildings/{id}/positions | buildings/{id}/geofence-events | buildings/{id}/alarms | buildings/{id}/evacuation | organization/alarms | devices/{device_id}',
  );

export const clientFrames = {
  auth: z
    .object({ op: z.literal('auth'), token: z.string().min(1).describe('An access token (JWT) or an API key'), id })
    .describe('Authenticate, unless the upgrade request carried credentials'),
  subscribe: z
    .object({
      op: z.literal('subscribe'),
      topics: z.array(topic).min(1).max(100),
      since_seq: z
        .number()
        .int()
        .min(0)
        .optional()
        .describe(
          "Alarm topics: replay alarms after this seq first; evacuation topics: the active roll's entries changed after it (0: all)",
        ),
      id,
    })
    .describe('Follow topics; answered by `subscribed` (accepted topics) and one `error` per refused topic'),
  unsubscribe: z.object({ op: z.literal('unsubscribe'), topics: z.array(topic).min(1).max(100), id }).describe('Stop following topics'),
  upload: z
    .object({ op: z.literal('upload'), poses: z.array(poseSchema).min(1).max(10_000), id })
    .describe('Upload positions; `ack` once the whole batch is durably stored'),
  ping: z.object({ op: z.literal('ping'), id }).describe('Answered by `pong`'),
};

const alarmEventSchema = alarmSchema.extend({ event: z.enum(ALARM_EVENT_KINDS) });
const geofenceEventSchema = z.object({
  type: z.enum(['enter', 'exit']),
  zone_kind: z.literal('geofence'),
  geofence_id: z.string(),
  zone_id: z.string(),
  zone_name: z.string(),
  building_id: z.number().int(),
  floor_id: z.number().int().nullable(),
  device_id: z.string(),
  user_id: z.string().nullable(),
  at: z.string().describe('When the device crossed'),
  fired_at: z.string().describe('When it was decided (after any debounce)'),
  late: z.boolean().describe('Found from fixes that arrived late (an offline buffer): `at` is in the past'),
  delay_ms: z.number().int().optional().describe('With late: how long after `at` it was learned'),
  supersedes: z
    .object({ type: z.enum(['enter', 'exit']), at: z.string() })
    .optional()
    .describe("A correction: the device's earlier event of this zone that late fixes contradicted (no longer stands)"),
});
const deviceEventSchema = z.object({
  event_id: z.number().int(),
  building_id: z.number().int(),
  name: z.string(),
  info: z.string(),
  url: z.string().nullable().optional(),
});

const evacuationChangeSchema = z.object({
  kind: z.enum(['started', 'ended', 'entry']),
  evacuation_id: z.string(),
  building_id: z.number().int(),
  evacuation: evacuationSummarySchema.optional().describe('With started and ended'),
  seq: z.number().int().optional().describe("With entry: the entry's change seq (resume with since_seq)"),
  entry: rollEntrySchema.optional().describe('With entry: the roll entry as it now stands'),
});

export const serverFrames = {
  authenticated: z.object({
    op: z.literal('authenticated'),
    id,
    user_id: z.string(),
    organization_id: z.string(),
    role: z.string(),
    permission: z.string(),
  }),
  subscribed: z.object({ op: z.literal('subscribed'), id, topics: z.array(z.string()).describe('The topics accepted') }),
  unsubscribed: z.object({
    op: z.literal('unsubscribed'),
    id,
    topics: z.array(z.string()),
    reason: z.string().optional().describe('Set when the server dropped the subscription (a device handed to another user, or deleted)'),
    status: z.number().int().optional().describe('With `reason`: the status a new subscription would get'),
  }),
  ack: z.object({ op: z.literal('ack'), id, count: z.number().int().describe('Positions stored') }),
  pong: z.object({ op: z.literal('pong'), id }),
  error: z
    .object({
      op: z.literal('error'),
      id,
      topic: z.string().optional().describe('The refused topic, for a subscription'),
      status: z.number().int(),
      code: z.string(),
      message: z.string(),
      errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
    })
    .describe('An operation failed; the connection stays open'),
  position: z.object({ op: z.literal('position'), topic: z.string(), data: featureSchema }).describe('One live position (the default)'),
  positions: z
    .object({ op: z.literal('positions'), topic: z.string(), data: z.array(featureSchema) })
    .describe('A batch of live positions of one topic (`?positions=batched`)'),
  geofence_event: z
    .object({ op: z.literal('geofence_event'), topic: z.string(), data: geofenceEventSchema })
    .describe('One enter or exit (the default)'),
  geofence_events: z
    .object({
      op: z.literal('geofence_events'),
      topic: z.string(),
      data: z.array(geofenceEventSchema).min(1).describe('In the order they happened'),
    })
    .describe(
      "The enters and exits of one batch the building's owner detected together (a few uploads or one sweep; at most 2,000) in the topic's building (`?events=batched`)",
    ),
  event: z
    .object({ op: z.literal('event'), topic: z.string(), data: deviceEventSchema })
    .describe('A device entered an event area (devices/{id} topic; the default)'),
  events: z
    .object({ op: z.literal('events'), topic: z.string(), data: z.array(deviceEventSchema).min(1).describe('In the order they happened') })
    .describe('The event areas a device entered in one batch detected together (devices/{id} topic; `?events=batched`)'),
  evacuation: z
    .object({
      op: z.literal('evacuation'),
      topic: z.string(),
      data: evacuationChangeSchema,
      replay: z.literal(true).optional().describe('Sent by a since_seq replay'),
    })
    .describe("An evacuation of the topic's building started or ended, or a person on its roll changed status (buildings/{id}/evacuation)"),
  alarm: z
    .object({
      op: z.literal('alarm'),
      topic: z.string(),
      data: alarmEventSchema,
      replay: z.literal(true).optional().describe('Sent by a since_seq replay'),
    })
    .describe('An alarm raised, repeated, changed or escalated'),
};

export const clientFrameSchema = z.discriminatedUnion('op', Object.values(clientFrames) as never);
export const serverFrameSchema = z.discriminatedUnion('op', Object.values(serverFrames) as never);

const payload = (schema: z.ZodType, io: 'input' | 'output') => ({
  schemaFormat: 'application/schema+json;version=draft-2020-12',
  schema: jsonSchema(schema, io),
});

/** The AsyncAPI 3.0 document of the WebSocket protocol: one channel, a `send` operation per client frame, a `receive` per server frame. */
export function buildAsyncApiDocument(): Record<string, unknown> {
  const messages: Record<string, unknown> = {};
  const operations: Record<string, unknown> = {};
  const channelMessages: Record<string, unknown> = {};
  const add = (side: 'client' | 'server', name: string, schema: z.ZodType) => {
    const key = `${side}_${name}`;
    messages[key] = {
      name,
      title: `${name} (${side === 'client' ? 'client to server' : 'server to client'})`,
      summary: schema.description,
      payload: payload(schema, side === 'client' ? 'input' : 'output'),
    };
    channelMessages[key] = { $ref: `#/components/messages/${key}` };
    // AsyncAPI's actions are the application's: the gateway receives what clients send, and sends the rest.
    operations[key] = {
      action: side === 'client' ? 'receive' : 'send',
      channel: { $ref: '#/channels/ws' },
      messages: [{ $ref: `#/channels/ws/messages/${key}` }],
    };
  };
  for (const [name, schema] of Object.entries(clientFrames)) add('client', name, schema);
  for (const [name, schema] of Object.entries(serverFrames)) add('server', name, schema);
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'Floorcast real-time gateway (WebSocket)',
      version: packageVersion,
      description:
        'GET /api/v1/ws upgrades to a WebSocket. Credentials: `Authorization: Bearer` or `X-API-KEY` on the upgrade, or an `auth` frame within the auth timeout (else close 4401). ' +
        'Frames are JSON text, or msgpack binary with the `msgpack` subprotocol. `?positions=batched` sends `positions` frames instead of one `position` per fix; ' +
        "`?events=batched` sends `geofence_events` and `events` frames (all of a batch's events for the topic, as detected together) instead of one `geofence_event` or `event` per event. Alarms always come one `alarm` frame per alarm event. " +
        'Close codes: 4401 not authenticated, 4008 slow consumer, 1001 shutting down, 1012 messages may have been missed (the gateway lost Redis for a while): reconnect and resume alarm and evacuation topics with since_seq. The REST API is at /api/v1/openapi.json.',
    },
    defaultContentType: 'application/json',
    channels: { ws: { address: '/api/v1/ws', title: 'The gateway socket', messages: channelMessages } },
    operations,
    components: {
      messages,
      schemas: { ClientFrame: jsonSchema(clientFrameSchema, 'input'), ServerFrame: jsonSchema(serverFrameSchema, 'output') },
    },
  };
}
