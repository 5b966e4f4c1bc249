import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { BuildingRegistry } from '../realtime/building-registry.js';
import { TopicEvents } from './event-frames.js';
import { LivePosition, TopicPositions } from './position-frames.js';
import { visibleTo, type TopicRegistry } from './topic-registry.js';
import { isConfinedTopic, topicKey } from './topics.js';
import type { Connection } from './ws-connection.js';
import { encode, type WireFormat } from './ws-codec.js';

/**
 * Fan-out, the one job of this file: a live frame for a topic goes to each subscriber of the topic that may see
 * it, encoded once per format, in one write per subscriber. Only ws/live-feeds.ts calls it, through
 * WebSocketGateway: that file decides what is pushed, this one how it reaches the subscribers.
 */
export class TopicFanOut {
  constructor(
    private readonly topics: TopicRegistry,
    private readonly registry: BuildingRegistry,
  ) {}

  /**
   * Live positions to `buildings/{id}/positions` and `devices/{id}` subscribers. A position's Feature is built
   * once, each topic's frames are encoded once per format (TopicPositions), and each subscriber gets all of
   * its frames of the batch in one write.
   */
  publishPositions(records: readonly PositionRecord[]): void {
    if (this.topics.isEmpty) return;
    const groups = new Map<string, { group: TopicPositions; subscribers: ReadonlySet<Connection> }>();
    const add = (key: string, topic: string, position: () => LivePosition) => {
      const subscribers = this.topics.subscribers(key);
      if (!subscribers || subscribers.size === 0) return;
      let entry = groups.get(key);
      if (!entry) groups.set(key, (entry = { group: new TopicPositions(topic), subscribers }));
      entry.group.positions.push(position());
    };
    for (const record of records) {
      let position: LivePosition | undefined;
      const live = () => (position ??= new LivePosition(record, this.levelHeightOf(record)));
      add(topicKey(record.organizationId, `devices/${record.deviceId}`), `devices/${record.deviceId}`, live);
      if (record.buildingId !== null) {
        const topic = `buildings/${record.buildingId}/positions`;
        add(topicKey(record.organizationId, topic), topic, live);
      }
    }
    const outgoing = new Map<Connection, TopicPositions[]>();
    // A confined subscriber gets the group's positions of its own user: filtered once per topic and user.
    const confined = new Map<string, TopicPositions | undefined>();
    const confine = (key: string, group: TopicPositions, userId: string) => {
      const cacheKey = `${key}|${userId}`;
      if (!confined.has(cacheKey)) {
        const own = group.positions.filter((position) => position.record.userId === userId);
        confined.set(cacheKey, own.length > 0 ? new TopicPositions(group.topic, own) : undefined);
      }
      return confined.get(cacheKey);
    };
    for (const [key, { group, subscribers }] of groups) {
      const confinable = isConfinedTopic(group.topic);
      for (const connection of subscribers) {
        const mine = confinable && connection.confinedTo !== undefined ? confine(key, group, connection.confinedTo) : group;
        if (!mine) continue;
        const list = outgoing.get(connection);
        if (list) list.push(mine);
        else outgoing.set(connection, [mine]);
      }
    }
    for (const [connection, list] of outgoing) connection.sendPositions(list);
  }

  private levelHeightOf(record: PositionRecord): number | null {
    if (record.floorId === null || record.buildingId === null) return null;
    return this.registry.peek(record.buildingId)?.floors.get(record.floorId)?.levelHeight ?? null;
  }

  /**
   * One bus message's geofence events and event-area contents of an organization, grouped by topic (in the
   * order they happened). Each group's frames are encoded once per format and shape (TopicEvents), a confined
   * subscriber gets the events about its own user (filtered once per topic and user), and each subscriber gets
   * all of its frames of the message in one write. These topics have no replay: nothing passes a ReplayGate.
   */
  publishEvents(organizationId: string, groups: readonly TopicEvents[]): void {
    const outgoing = new Map<Connection, TopicEvents[]>();
    for (const group of groups) {
      const subscribers = this.topics.subscribers(topicKey(organizationId, group.topic));
      if (!subscribers) continue;
      const confinable = isConfinedTopic(group.topic);
      const confined = new Map<string, TopicEvents | undefined>();
      for (const connection of subscribers) {
        let mine: TopicEvents | undefined = group;
        const userId = connection.confinedTo;
        if (confinable && userId !== undefined) {
          if (!confined.has(userId)) {
            const own = group.events.filter((event) => event.userId === userId);
            confined.set(userId, own.length > 0 ? new TopicEvents(group.topic, group.ops, own) : undefined);
          }
          mine = confined.get(userId);
        }
        if (!mine) continue;
        const list = outgoing.get(connection);
        if (list) list.push(mine);
        else outgoing.set(connection, [mine]);
      }
    }
    for (const [connection, list] of outgoing) connection.sendEvents(list);
  }

  /**
   * Any other message to a topic (alarms); never coalesced. Encoded once per
   * format; a confined subscriber gets it only when it is about its user, a replaying one through its gate.
   */
  publish(organizationId: string, topic: string, op: string, data: unknown): void {
    const key = topicKey(organizationId, topic);
    const subscribers = this.topics.subscribers(key);
    if (!subscribers) return;
    const frame = { op, topic, data };
    const encoded: Partial<Record<WireFormat, string | Buffer>> = {};
    for (const connection of subscribers) {
      if (!visibleTo(connection, topic, data)) continue;
      const gate = connection.replays.get(key);
      if (gate && !gate.live(frame)) continue;
      connection.send((encoded[connection.format] ??= encode(connection.format, frame)));
    }
  }
}
