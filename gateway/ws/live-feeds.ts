import type { Bus } from '../../shared/bus/index.js';
import { ALARMS_CHANNEL, type AlarmEventMessage, type AlarmService } from '../alarms/alarm-service.js';
import { AUTH_INVALIDATION_CHANNEL, CREDENTIAL_REVOKED, type AuthInvalidation } from '../auth/authenticator.js';
import type { ZoneEventRecord } from '../detection/detection-engine.js';
import { ZONE_EVENTS_CHANNEL, type ZoneEventsMessage } from '../detection/zone-events-message.js';
import type { RealtimeService } from '../realtime/realtime-service.js';
import type { WebSocketGateway } from './ws-gateway.js';

/** Where the feeds come from: the bus, and the live state that turns bus positions into fresh ones. */
export interface LiveFeedSources {
  bus: Bus;
  realtime: RealtimeService;
  alarms: AlarmService;
}

const presentZoneEvent = (event: ZoneEventRecord) => ({
  type: event.type,
  zone_kind: event.zoneKind,
  geofence_id: event.zoneKind === 'geofence' ? event.zoneId : null,
  zone_id: event.zoneId,
  zone_name: event.zoneName,
  building_id: event.buildingId,
  floor_id: event.floorId,
  device_id: event.deviceId,
  user_id: event.userId,
  at: new Date(event.at).toISOString(),
  fired_at: new Date(event.firedAt).toISOString(),
});

const ALARM_TOPICS = /^(organization\/alarms|buildings\/\d+\/alarms)$/;

/**
 * Every push to WebSocket subscribers, in one place. Each feed turns what arrives on the bus (from any
 * gateway, this one included) into frames for a topic; WebSocketGateway knows the topics, the connections and
 * who may see what. Nothing else writes to sockets.
 *
 * | source                               | topic(s)                                         | frame            |
 * |--------------------------------------|--------------------------------------------------|------------------|
 * | fresh live positions (RealtimeService)| buildings/{id}/positions, devices/{id}          | position(s)      |
 * | ZONE_EVENTS_CHANNEL: enter/exit      | buildings/{id}/geofence-events                   | geofence_event   |
 * | ZONE_EVENTS_CHANNEL: event triggers  | devices/{id}                                     | event            |
 * | ALARMS_CHANNEL                       | organization/alarms, buildings/{id}/alarms       | alarm (+ replay) |
 * | AUTH_INVALIDATION_CHANNEL, revoked   | the credential's sockets are closed (4401)       |                  |
 */
export async function attachLiveFeeds({ bus, realtime, alarms }: LiveFeedSources, websockets: WebSocketGateway): Promise<void> {
  realtime.onFreshPositions((records) => websockets.publishPositions(records));

  await bus.subscribe(ZONE_EVENTS_CHANNEL, (payload) => {
    const message = payload as ZoneEventsMessage;
    for (const event of message.zoneEvents) {
      if (event.zoneKind === 'geofence') websockets.publish(message.organizationId, `buildings/${event.buildingId}/geofence-events`, 'geofence_event', presentZoneEvent(event));
    }
    for (const trigger of message.triggered) {
      const { event } = trigger;
      websockets.publish(message.organizationId, `devices/${trigger.deviceId}`, 'event', { event_id: event.id, building_id: event.buildingId, name: event.name, info: event.info, url: event.url });
    }
  });

  await bus.subscribe(ALARMS_CHANNEL, (payload) => {
    const message = payload as AlarmEventMessage;
    websockets.publish(message.organizationId, 'organization/alarms', 'alarm', message.event);
    if (message.buildingId !== null) websockets.publish(message.organizationId, `buildings/${message.buildingId}/alarms`, 'alarm', message.event);
  });
  // What a reconnecting screen missed: stored alarm events after its since_seq, before the live feed above.
  websockets.registerReplay(ALARM_TOPICS, async (principal, topic, sinceSeq, send, confinedTo) => {
    const building = /^buildings\/(\d+)\//.exec(topic);
    for await (const event of alarms.eventsSince(principal.organizationId, sinceSeq, building ? Number(building[1]) : undefined)) {
      if (confinedTo === undefined || event.user_id === confinedTo) send({ op: 'alarm', topic, data: event, replay: true });
    }
  });

  // A revoked credential's open sockets end on every gateway: all of a key's, or a user's opened with another
  // credential version than the current one (all of them when none is given).
  await bus.subscribe(AUTH_INVALIDATION_CHANNEL, (payload) => {
    const change = payload as AuthInvalidation;
    if (!change.revoke) return;
    const { code, reason } = CREDENTIAL_REVOKED;
    if (change.apiKeyId) websockets.closeWhere((principal) => principal.apiKeyId === change.apiKeyId, code, reason);
    if (change.userId) {
      const version = change.credentialVersion;
      websockets.closeWhere((principal) => principal.userId === change.userId && (version === undefined || (principal.credentialVersion ?? 0) !== version), code, reason);
    }
  });
}
