import { sanitiseEventHtml } from '../../../gateway/routes/events.route.js';
import { redactUrl, urlFingerprint } from '../../../gateway/webhooks/webhook-presenters.js';
import { squareCartesians } from '../../../testkit/cartography.js';
import type { TestClient, TestResponse } from '../../../testkit/http-client.js';
import { login } from '../../../testkit/identity.js';
import { valuesAt } from './round-trip.js';
import type { SeededWorld } from './seeded-world.js';

/** What a fixture works with: the seeded world, and objects made for the writes that replace or patch one. */
export interface RoundTripContext extends SeededWorld {
  client: TestClient;
  /** Creates an object (POST, must answer 201/200) and returns its id. */
  create(path: string, body: unknown): Promise<string>;
  /** A number no other call of this run returns: unique names, levels, e-mails. */
  unique(): number;
}

/** A check of one text field after a 2xx write: where it reads back, and what it must read back as. */
export interface ReadCheck {
  read(object: any): unknown[];
  expected(sent: string): string;
}

/** How to exercise one write operation of the document. */
export interface WriteFixture {
  /** A valid body; the suite replaces its text fields with generated text. */
  body(context: RoundTripContext): Promise<unknown> | unknown;
  /** The id the `{id}` of a PUT or PATCH names; made once, before the first body, or before every request when `freshTarget`. */
  target?(context: RoundTripContext): Promise<string>;
  freshTarget?: boolean;
  /** The object as read after a 2xx write (default: GET of the written object's own path). */
  read?(context: RoundTripContext, response: TestResponse, path: string, sent: unknown): Promise<unknown>;
  /** Fields that read back elsewhere or transformed, as the route documents (default: same path, same value). */
  checks?: Record<string, ReadCheck[]>;
  /** Fields made unique per request (unique keys), by a prefix. */
  unique?: string[];
  /** Wraps generated text into what the field takes (a URL around it). */
  compose?: Record<string, (text: string) => string>;
  /** Text fields the suite does not fill, each with why (not free text in fact, or only ever refused). */
  notWritten?: Record<string, string>;
  /** Text fields not compared, each with why. */
  notReadable?: Record<string, string>;
  /** At most this many runs for this write, when it is costly (each makes an organization and signs in). */
  runs?: number;
}

/** Writes that store no object a GET can read, each with why; every other write of the document needs a fixture. */
export const NOT_ROUND_TRIPPED: Record<string, string> = {
  'POST /api/v1/auth/access_tokens': 'signs in, stores nothing (a hostile e-mail is 401: test/integration/hostile-text.test.ts)',
  'POST /api/v1/auth/refresh_access_tokens': 'exchanges a token, stores nothing of what is sent',
  'POST /api/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver': 'takes no body',
  'POST /api/v1/images': 'multipart upload: its file name is covered by test/integration/images.test.ts',
  'POST /api/v1/buildings/{id}/evacuations/{evacuation}/end': 'takes no body',
  'POST /api/v1/buildings/{id}/evacuations/{evacuation}/roll/{entry}/safe':
    'three path ids where the suite fills one; its comment reads back in test/integration/evacuation.test.ts',
  'POST /api/v1/users/{id}/erasure':
    'takes only two instants; what it stores is read back by its own GET in test/integration/privacy.test.ts',
};

/** Names the routes trim (`z.string().trim()`): they read back without spaces at either end. */
const trimmed = (...fields: string[]): Record<string, ReadCheck[]> =>
  Object.fromEntries(fields.map((field) => [field, [{ read: (object: any) => [object[field]], expected: (sent: string) => sent.trim() }]]));

const position = (context: RoundTripContext, x = 5) => ({ floor_id: Number(context.ids.floor), cartesians: { x, y: 5 } });
const building = (context: RoundTripContext) => ({
  name: `Building ${context.unique()}`,
  description: 'd',
  info: 'i',
  location: { lat: 40.4, lng: -3.7 },
  dimensions: { width: 50, length: 30 },
  custom_fields: [{ key: 'k', value: 'v' }],
});
const user = (context: RoundTripContext) => ({
  email: `round-trip-${context.unique()}@example.test`,
  password: 'password-1',
  role: 'user',
  full_name: 'F',
  code: 'c',
  locale: 'en',
  info: 'i',
});
const floor = (context: RoundTripContext, level: number, buildingId = context.ids.building) => ({
  building_id: Number(buildingId),
  level,
  name: 'F',
  custom_fields: [{ key: 'k', value: 'v' }],
});
const poi = (context: RoundTripContext) => ({
  building_id: Number(context.ids.building),
  name: 'Lift',
  info: 'i',
  position: position(context),
  custom_fields: [{ key: 'k', value: 'v' }],
});
const event = (context: RoundTripContext) => ({
  building_id: Number(context.ids.building),
  name: 'Promo',
  info: '<p>x</p>',
  url: 'https://example.test/promo',
  position: { ...position(context), radius: 3 },
  custom_fields: [{ key: 'k', value: 'v' }],
});
const geofence = (context: RoundTripContext) => ({
  name: 'Hall',
  code: 'c',
  description: 'd',
  info: 'i',
  building_id: Number(context.ids.building),
  floor_id: Number(context.ids.floor),
  type: 'POLYGON',
  cartesians: squareCartesians(1, 1, 10),
  custom_fields: [{ key: 'k', value: 'v' }],
});
const infrastructure = (context: RoundTripContext) => ({
  building_id: Number(context.ids.building),
  type: 'wifi',
  bssid: '00:11:22:33:44:55',
  name: 'AP',
  ssid: 'net',
  position: position(context, 1),
});
const trackingWindow = () => ({
  time_zone: 'Europe/Paris',
  weekly: [{ day: 'mon', from: '08:00', to: '17:00' }],
  exceptions: [{ date: '2026-12-25', ranges: [] }],
});
const trackingWindowText: Record<string, string> = {
  time_zone: 'an IANA time zone name: any other text is 422',
  'weekly[].from': 'HH:MM',
  'weekly[].to': 'HH:MM',
  'exceptions[].date': 'YYYY-MM-DD',
};
const webhook = () => ({ url: 'https://example.test/hook', events: ['alarm.raised'], description: 'd' });
/** A URL around the text: webhooks refuse what is not one, and must read back exactly what they took. */
const inUrl = (text: string) => `https://example.test/hook?q=${text}`;
/** Documented on the field: shown with its credentials (userinfo, query values) hidden; the fingerprint is of what was stored. */
const webhookChecks: Record<string, ReadCheck[]> = {
  url: [
    { read: (object) => [object.url], expected: redactUrl },
    { read: (object) => [object.url_fingerprint], expected: urlFingerprint },
  ],
};

const eventChecks: Record<string, ReadCheck[]> = {
  ...trimmed('name'),
  // Documented on the field: stored as sent (info_unsafe) and sanitised (info).
  info: [
    { read: (object) => [object.info_unsafe], expected: (sent) => sent },
    { read: (object) => [object.info], expected: (sent) => sanitiseEventHtml(sent) },
  ],
};
const geofenceNotWritten = { organization_id: "not free text: only the caller's own organization id is taken (anything else is 422)" };
const roleNotWritten = { role: 'not free text: a role name or one of its aliases (the malformed-request fuzz covers the rest)' };
const alarmComment: ReadCheck[] = [{ read: (alarm) => [alarm.history.at(-1)?.comment], expected: (sent) => sent }];

const floorTarget = { buildingId: '' };

/** Every write of the document that stores something, keyed as `METHOD /path`. */
export const WRITE_FIXTURES: Record<string, WriteFixture> = {
  'POST /api/v1/auth/apikeys': {
    body: () => ({ permission: 'read-only', description: 'd' }),
    read: async (context, response) => {
      const keys = await context.client.get('/api/v1/auth/apikeys');
      const list = Array.isArray(keys.body) ? keys.body : (keys.body.content ?? keys.body.data);
      return list.find((key: { id: string }) => key.id === response.body.id);
    },
  },
  'POST /api/v1/organizations': {
    runs: 4,
    body: (context) => ({
      name: `Org ${context.unique()}`,
      admin: { email: `org-admin-${context.unique()}@example.test`, password: 'password-1', full_name: 'A' },
    }),
    read: async (context, response, _path, sent) => {
      const tokens = await login(
        context.client.withHeaders({ authorization: '' }),
        response.body.admin.email,
        (sent as { admin: { password: string } }).admin.password,
      );
      const admin = context.client.withToken(tokens.access_token);
      const organization = (await admin.get('/api/v1/organizations/current_organization')).body;
      return { ...organization, admin: (await admin.get(`/api/v1/users/${response.body.admin.id}`)).body };
    },
    checks: { ...trimmed('name') },
    notReadable: { 'admin.password': 'write-only: signing in with it, as sent, is how the read above works' },
  },
  'POST /api/v1/users': { body: user, notReadable: { password: 'write-only' }, notWritten: roleNotWritten },
  'PUT /api/v1/users/{id}': {
    body: async (context) => ({ ...user(context), email: `round-trip-put-${context.unique()}@example.test` }),
    target: (context) => context.create('/api/v1/users', user(context)),
    notReadable: { password: 'write-only' },
    notWritten: roleNotWritten,
  },
  'PATCH /api/v1/users/{id}': {
    body: () => ({ full_name: 'F', code: 'c', locale: 'en', info: 'i' }),
    target: async (context) => context.ids.user,
    notReadable: { password: 'write-only' },
    notWritten: { ...roleNotWritten, password: "changing the victim's password is PUT's and POST's job" },
  },
  'POST /api/v1/groups': { body: () => ({ name: 'G', description: 'd' }), unique: ['name'], checks: trimmed('name') },
  'PUT /api/v1/groups/{id}': {
    body: () => ({ name: 'G', description: 'd' }),
    target: async (context) => context.ids.group,
    unique: ['name'],
    checks: trimmed('name'),
  },
  'PATCH /api/v1/groups/{id}': {
    body: () => ({ name: 'G', description: 'd' }),
    target: async (context) => context.ids.group,
    unique: ['name'],
    checks: trimmed('name'),
  },
  'POST /api/v1/devices': { body: () => ({ identifier: 'd', name: 'n' }), unique: ['identifier'], checks: trimmed('identifier') },
  'PUT /api/v1/devices/{id}': {
    body: () => ({ identifier: 'd', name: 'n' }),
    target: async (context) => context.ids.device,
    unique: ['identifier'],
    checks: trimmed('identifier'),
  },
  'PATCH /api/v1/devices/{id}': {
    body: () => ({ identifier: 'd', name: 'n' }),
    target: async (context) => context.ids.device,
    unique: ['identifier'],
    checks: trimmed('identifier'),
  },
  'POST /api/v1/buildings': { body: building, checks: trimmed('name') },
  'PUT /api/v1/buildings/{id}': {
    body: building,
    target: (context) => context.create('/api/v1/buildings', building(context)),
    checks: trimmed('name'),
  },
  'PATCH /api/v1/buildings/{id}': {
    body: building,
    target: (context) => context.create('/api/v1/buildings', building(context)),
    checks: trimmed('name'),
  },
  'POST /api/v1/floors': { body: (context) => floor(context, context.unique()) },
  'PUT /api/v1/floors/{id}': {
    // A floor of its own building, replaced with its own building and level each time.
    target: async (context) => {
      floorTarget.buildingId = await context.create('/api/v1/buildings', building(context));
      return context.create('/api/v1/floors', floor(context, 0, floorTarget.buildingId));
    },
    body: (context) => floor(context, 0, floorTarget.buildingId),
  },
  'PATCH /api/v1/floors/{id}': {
    body: () => ({ name: 'F', custom_fields: [{ key: 'k', value: 'v' }] }),
    target: async (context) => context.ids.floor,
  },
  'POST /api/v1/poi_categories': {
    body: () => ({ name_en: 'E', name_es: 'S', code: 'c' }),
    unique: ['code'],
    checks: trimmed('name_en', 'code'),
  },
  'PUT /api/v1/poi_categories/{id}': {
    body: () => ({ name_en: 'E', name_es: 'S', code: 'c' }),
    target: async (context) => context.ids.poiCategory,
    unique: ['code'],
    checks: trimmed('name_en', 'code'),
  },
  'PATCH /api/v1/poi_categories/{id}': {
    body: () => ({ name_en: 'E', name_es: 'S', code: 'c' }),
    target: async (context) => context.ids.poiCategory,
    unique: ['code'],
    checks: trimmed('name_en', 'code'),
  },
  'POST /api/v1/pois': { body: poi, checks: trimmed('name') },
  'PUT /api/v1/pois/{id}': { body: poi, target: async (context) => context.ids.poi, checks: trimmed('name') },
  'PATCH /api/v1/pois/{id}': { body: poi, target: async (context) => context.ids.poi, checks: trimmed('name') },
  'POST /api/v1/pois_bulk': {
    body: (context) => [poi(context), poi(context)],
    read: async (context, response) =>
      Promise.all(
        (response.body as { id: number }[]).map(async (created) => (await context.client.get(`/api/v1/pois/${created.id}`)).body),
      ),
    checks: { '[].name': [{ read: (pois) => pois.map((created: { name: string }) => created.name), expected: (sent) => sent.trim() }] },
  },
  'POST /api/v1/events': { body: event, checks: eventChecks },
  'PUT /api/v1/events/{id}': { body: event, target: async (context) => context.ids.event, checks: eventChecks },
  'PATCH /api/v1/events/{id}': { body: event, target: async (context) => context.ids.event, checks: eventChecks },
  'POST /api/v1/geofences': { body: geofence, checks: trimmed('name'), notWritten: geofenceNotWritten },
  'PUT /api/v1/geofences/{id}': {
    body: geofence,
    target: async (context) => context.ids.geofence,
    checks: trimmed('name'),
    notWritten: geofenceNotWritten,
  },
  'PATCH /api/v1/geofences/{id}': {
    body: geofence,
    target: async (context) => context.ids.geofence,
    checks: trimmed('name'),
    notWritten: geofenceNotWritten,
  },
  'POST /api/v1/areas': { body: geofence, checks: trimmed('name'), notWritten: geofenceNotWritten },
  'PUT /api/v1/areas/{id}': {
    body: geofence,
    target: async (context) => context.ids.geofence,
    checks: trimmed('name'),
    notWritten: geofenceNotWritten,
  },
  'PATCH /api/v1/areas/{id}': {
    body: geofence,
    target: async (context) => context.ids.geofence,
    checks: trimmed('name'),
    notWritten: geofenceNotWritten,
  },
  'PUT /api/v1/buildings/{building_id}/paths': {
    body: (context) => ({
      nodes: [
        { id: 1, floor_id: Number(context.ids.floor), x: 1, y: 1 },
        { id: 2, floor_id: Number(context.ids.floor), x: 9, y: 9 },
      ],
      links: [{ source: 1, target: 2, tags: ['t'] }],
    }),
    target: async (context) => context.ids.building,
    read: async (context, _response, path) => (await context.client.get(path)).body,
  },
  'POST /api/v1/infrastructure': { body: infrastructure },
  'PUT /api/v1/infrastructure/{id}': { body: infrastructure, target: async (context) => context.ids.infrastructure },
  'PATCH /api/v1/infrastructure/{id}': { body: infrastructure, target: async (context) => context.ids.infrastructure },
  'POST /api/v1/realtime/positions': {
    body: (context) => ({
      poses: [
        {
          device_id: 'p',
          timestamp: Date.now() - 1000,
          building_id: Number(context.ids.building),
          floor_id: Number(context.ids.floor),
          x: 5,
          y: 5,
        },
      ],
    }),
    unique: ['poses[].device_id'],
    // The live position of exactly that device id (absent if the id was not stored as sent).
    read: async (context, _response, _path, sent) => {
      const identifier = (sent as { poses: { device_id: string }[] }).poses[0]!.device_id.trim();
      const live = await context.client.get('/api/v1/realtime/positions');
      const feature = live.body.features.find(
        (candidate: { properties: { device_id: string } }) => candidate.properties.device_id === identifier,
      );
      return { poses: [{ device_id: feature?.properties.device_id }] };
    },
    // The pose schema trims device ids, as the devices route trims identifiers.
    checks: {
      'poses[].device_id': [{ read: (object) => valuesAt(object, ['poses', '[]', 'device_id']), expected: (sent) => sent.trim() }],
    },
  },
  'POST /api/v1/alarms': {
    body: () => ({ type: 'DANGER', device_id: 'd', comment: 'c' }),
    unique: ['device_id'],
    checks: { comment: alarmComment },
  },
  'PATCH /api/v1/alarms/{id}': {
    freshTarget: true,
    body: () => ({ state: 'CONFIRMED', comment: 'c' }),
    target: (context) => context.create('/api/v1/alarms', { type: 'DANGER', device_id: `alarm-target-${context.unique()}` }),
    checks: { comment: alarmComment },
  },
  // One comment for every alarm it changes: each alarm's history carries it, as PATCH's does.
  'POST /api/v1/alarms/bulk': {
    body: async (context) => ({
      ids: [await context.create('/api/v1/alarms', { type: 'DANGER', device_id: `bulk-target-${context.unique()}` })],
      state: 'CONFIRMED',
      comment: 'c',
    }),
    read: async (context, _response, _path, sent) =>
      (await context.client.get(`/api/v1/alarms/${(sent as { ids: string[] }).ids[0]}`)).body,
    checks: { comment: alarmComment },
  },
  // No free text: numbers and switches, read back from the same path.
  'PUT /api/v1/organizations/current_organization/alarm_settings': {
    body: () => ({ escalate_after_s: 60, escalate_max: 3, comment_always: false, deadman_auto_close: false }),
  },
  'PUT /api/v1/organizations/current_organization/privacy_settings': {
    body: () => ({
      reports_pseudonymous: false,
      retention_days: { positions: 30, zone_events: 60, stays_and_rollups: 90, alarm_positions: null, audit: 120 },
    }),
  },
  'PUT /api/v1/buildings/{id}/alarm_settings': {
    body: () => ({ deadman_after_s: 60, deadman_radius_m: 2, deadman_silence_s: 120 }),
    target: async (context) => context.ids.building,
  },
  // A fresh building each time: one evacuation may be active per building.
  'POST /api/v1/buildings/{id}/evacuations': {
    freshTarget: true,
    target: (context) => context.create('/api/v1/buildings', building(context)),
    body: () => ({ note: 'n', drill: true }),
    read: async (context, response, path) => (await context.client.get(`${path}/${response.body.id}`)).body,
  },
  // No free text: a time zone, weekdays, clock times and dates, each checked (a text there is 422).
  'PUT /api/v1/users/{id}/tracking_window': {
    body: trackingWindow,
    target: (context) => context.create('/api/v1/users', user(context)),
    notWritten: trackingWindowText,
  },
  'PUT /api/v1/groups/{id}/tracking_window': {
    body: trackingWindow,
    target: (context) => context.create('/api/v1/groups', { name: `Window group ${context.unique()}` }),
    notWritten: trackingWindowText,
  },
  'POST /api/v1/webhooks': { body: webhook, compose: { url: inUrl }, checks: webhookChecks },
  'PATCH /api/v1/webhooks/{id}': {
    body: webhook,
    target: (context) => context.create('/api/v1/webhooks', webhook()),
    compose: { url: inUrl },
    checks: webhookChecks,
  },
};
