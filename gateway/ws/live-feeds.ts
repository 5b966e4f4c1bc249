import type { AlarmEventMessage } from '../alarms/alarm-event-message.js';
import type { AlarmService } from '../alarms/alarm-service.js';
import { CREDENTIAL_REVOKED } from './ws-connection.js';
import type { Bus } from '../bus-channels.js';
import type { EvacuationService } from '../evacuations/evacuation-service.js';
import { presentEntry, presentSummary } from '../evacuations/presenters.js';
import type { RealtimeService } from '../realtime/realtime-service.js';
import { DEVICE_EVENT_OPS, GEOFENCE_EVENT_OPS, TopicEvents, deviceEvent, geofenceEvent } from './event-frames.js';
import type { WebSocketGateway } from './ws-gateway.js';

/** Where the feeds come from: the bus, and the live state that turns bus positions into fresh ones. */
export interface LiveFeedSources {
  bus: Bus;
  realtime: RealtimeService;
  alarms: AlarmService;
  evacuations: EvacuationService;
}

const ALARM_TOPICS = /^(organization\/alarms|buildings\/\d+\/alarms)$/;
const EVACUATION_TOPIC = /^buildings\/(\d+)\/evacuation$/;

/**
 * Every push to WebSocket subscribers, in one place. Each feed turns what arrives on the bus (from any
 * gateway, this one included) into frames for a topic; WebSocketGateway knows the topics, the connections and
 * who may see what. Nothing else writes to sockets.
 *
 * | source                               | topic(s)                                         | frame            |
 * |--------------------------------------|--------------------------------------------------|------------------|
 * | fresh live positions (RealtimeService)| buildings/{id}/positions, devices/{id}          | position(s)      |
 * | bus zone-events: enter/exit          | buildings/{id}/geofence-events                   | geofence_event(s)|
 * | bus zone-events: event triggers      | devices/{id}                                     | event(s)         |
 * | bus alarms (a list, in seq order)    | organization/alarms, buildings/{id}/alarms       | alarm (+ replay) |
 * | bus evacuations: roll changes        | buildings/{id}/evacuation                        | evacuation (+ replay) |
 * | bus auth:invalidate, revoked         | the credential's sockets are closed (4401)       |                  |
 * | bus devices:changed (owner changed)  | devices/{id} subscriptions checked again         | unsubscribed     |
 * | bus resync (Redis was away)          | sockets following alarms or an evacuation closed (1012): they resume with since_seq |  |
 */
export async function attachLiveFeeds(
  { bus, realtime, alarms, evacuations }: LiveFeedSources,
  websockets: WebSocketGateway,
): Promise<void> {
  realtime.onFreshPositions((records) => websockets.publishPositions(records));

  // One message is one batch's (or sweep's) events of one organization: a group per topic followed here, each
  // event presented once.
  await bus.subscribe('zone-events', ({ organizationId, zoneEvents, triggered }) => {
    const groups = new Map<string, TopicEvents | null>();
    const groupOf = (topic: string, ops: TopicEvents['ops']) => {
      let group = groups.get(topic);
      if (group === undefined) groups.set(topic, (group = websockets.followed(organizationId, topic) ? new TopicEvents(topic, ops) : null));
      return group;
    };
    for (const event of zoneEvents) {
      if (event.zoneKind === 'geofence')
        groupOf(`buildings/${event.buildingId}/geofence-events`, GEOFENCE_EVENT_OPS)?.events.push(geofenceEvent(event));
    }
    for (const trigger of triggered)
      groupOf(`devices/${trigger.deviceId}`, DEVICE_EVENT_OPS)?.events.push(deviceEvent(trigger.event, trigger.userId ?? null));
    const followed = [...groups.values()].filter((group): group is TopicEvents => group !== null);
    if (followed.length > 0) websockets.publishEvents(organizationId, followed);
  });

  // Alarm frames stay one per alarm event: the replay protocol (since_seq, ReplayGate) works by frame and seq,
  // and the console reads `alarm` frames only.
  await bus.subscribe('alarms', (payload) => {
    // A list since round 2; a gateway of the round before sends one message alone (a rolling upgrade mixes them).
    const messages: readonly AlarmEventMessage[] = Array.isArray(payload) ? payload : [payload];
    for (const message of messages) {
      websockets.publish(message.organizationId, 'organization/alarms', 'alarm', message.event);
      if (message.buildingId !== null)
        websockets.publish(message.organizationId, `buildings/${message.buildingId}/alarms`, 'alarm', message.event);
    }
  });
  // What a reconnecting screen missed: stored alarm events after its since_seq, before the live feed above.
  websockets.registerReplay(ALARM_TOPICS, async (principal, topic, sinceSeq, send, confinedTo) => {
    const building = /^buildings\/(\d+)\//.exec(topic);
    for await (const event of alarms.eventsSince(principal.organizationId, sinceSeq, building ? Number(building[1]) : undefined)) {
      if (confinedTo === undefined || event.user_id === confinedTo) send({ op: 'alarm', topic, data: event, replay: true });
    }
  });

  // Roll changes carry their entry's seq (started and ended frames none): a screen resumes with since_seq.
  await bus.subscribe('evacuations', (change) => {
    const { organizationId, buildingId, evacuationId, kind, evacuation, entry } = change;
    const data = {
      kind,
      evacuation_id: evacuationId,
      building_id: buildingId,
      ...(evacuation ? { evacuation } : {}),
      ...(entry ? { seq: entry.seq, entry } : {}),
    };
    websockets.publish(organizationId, `buildings/${buildingId}/evacuation`, 'evacuation', data);
  });
  // What a screen missed of the active evacuation: its entries changed after since_seq (0: the whole roll), in seq order.
  websockets.registerReplay(EVACUATION_TOPIC, async (principal, topic, sinceSeq, send) => {
    const buildingId = Number(EVACUATION_TOPIC.exec(topic)![1]);
    const changes = await evacuations.changesSince(principal.organizationId, buildingId, sinceSeq);
    if (!changes) return;
    const evacuation = presentSummary(changes.evacuation);
    send({
      op: 'evacuation',
      topic,
      data: { kind: 'started', evacuation_id: evacuation.id, building_id: buildingId, evacuation },
      replay: true,
    });
    for (const stored of changes.entries) {
      const entry = presentEntry(stored);
      send({
        op: 'evacuation',
        topic,
        data: { kind: 'entry', evacuation_id: evacuation.id, building_id: buildingId, seq: entry.seq, entry },
        replay: true,
      });
    }
  });

  // A device handed to someone else: its `devices/{id}` subscriptions follow its owner (checked again).
  await bus.subscribe('devices:changed', (change) => void websockets.recheckDeviceSubscriptions(change.organizationId));
  // Messages may have been lost: a revocation among them leaves sockets open, a reassignment subscriptions, and an
  // alarm or roll change pushed from another gateway never reached this one's screens. Those resume with since_seq.
  bus.onResync(() => {
    void websockets.revalidation.sweep();
    void websockets.recheckDeviceSubscriptions();
    websockets.closeResumable('messages may have been missed: resume with since_seq');
  });

  // A revoked credential's open sockets end on every gateway: all of a key's or a token family's, or a user's opened with another
  // credential version than the current one (all of them when none is given).
  await bus.subscribe('auth:invalidate', (change) => {
    if (!change.revoke) return;
    // First, so that a socket of this credential whose authentication is in flight is checked as it opens.
    websockets.revalidation.revoked(change);
    const { code, reason } = CREDENTIAL_REVOKED;
    if (change.apiKeyId) websockets.closeWhere((principal) => principal.apiKeyId === change.apiKeyId, code, reason);
    if (change.tokenFamilyId) websockets.closeWhere((principal) => principal.tokenFamilyId === change.tokenFamilyId, code, reason);
    if (change.userId) {
      const version = change.credentialVersion;
      websockets.closeWhere(
        (principal) => principal.userId === change.userId && (version === undefined || (principal.credentialVersion ?? 0) !== version),
        code,
        reason,
      );
    }
  });
}
