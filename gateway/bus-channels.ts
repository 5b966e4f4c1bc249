import type { Bus as BusOf } from '../shared/bus/index.js';
import type { PositionsMessage } from '../shared/positions/positions-message.js';
import type { AlarmEventMessage } from './alarms/alarm-event-message.js';
import type { ZoneEventsMessage } from './detection/zone-events-message.js';
import type { EvacuationChange } from './evacuations/evacuation-service.js';

/**
 * What the bus carries when a credential or user changes, so every gateway drops its cached copy at once.
 * With `revoke`, every gateway also closes the open sockets of that credential (gateway/ws/live-feeds.ts): all
 * of the key's, those of a refresh-token family's tokens, or those of the user opened with another credential
 * version than `credentialVersion` (all of them when unset).
 */
export interface AuthInvalidation {
  userId?: string;
  apiKeyHash?: string;
  apiKeyId?: string;
  tokenFamilyId?: string;
  revoke?: boolean;
  credentialVersion?: number;
}

/** A tracking window changed: one user's (`userId`), or one that may apply to many (a group's): the organization's. */
export interface TrackingWindowChange {
  organizationId: string;
  userId?: string;
}

/** An organization's devices changed (created, deleted, handed to another user). */
export interface DeviceChange {
  organizationId: string;
  identifier: string;
}

/** What changed in a building's cartography; every gateway rebuilds that building's spatial index on it. */
export interface CartographyChange {
  organizationId: string;
  buildingId: number;
  kind: 'building' | 'floor' | 'geofence' | 'event' | 'poi' | 'paths' | 'infrastructure';
  id: number | string;
  change: 'created' | 'updated' | 'deleted';
}

/**
 * Every flow between gateway instances, in one map: a bus channel's name and the payload that travels on it.
 * `Bus` below is typed by it, so publishing or subscribing on a channel not listed here, or with another
 * payload, does not compile, and a subscriber gets its payload's type without a cast. The names are those on
 * the wire (under REDIS_PREFIX): renaming one breaks a rolling upgrade. Publishers → subscribers:
 */
export interface Channels {
  /**
   * The accepted positions of one shard (`positions:<shard>`, gateway/cluster/rendezvous.ts: a building's, or a
   * device's outside buildings) → realtime/realtime-service.ts (live state) on the gateways interested in that shard
   * now (realtime/position-interest.ts): a socket following one of its buildings or a device, a live query, its owner.
   */
  [shard: `positions:${number}`]: PositionsMessage;
  /** Stored zone events and event-area triggers of one organization (detection/) → ws/live-feeds.ts. */
  'zone-events': ZoneEventsMessage;
  /** Stored alarm events, a list in seq order (alarms/alarm-service.ts) → ws/live-feeds.ts, the detection engine. */
  alarms: readonly AlarmEventMessage[];
  /** auth/authenticator.ts invalidate → every authenticator's cache, and ws/live-feeds.ts (revoked sockets). */
  'auth:invalidate': AuthInvalidation;
  /** realtime/device-directory.ts → every device directory, and ws/live-feeds.ts (device topics re-checked). */
  'devices:changed': DeviceChange;
  /** cartography/cartography-service.ts → realtime/building-registry.ts and routing/routing-service.ts. */
  'cartography:changed': CartographyChange;
  /** evacuations/evacuation-service.ts (each roll change, once stored) → every evacuation service, ws/live-feeds.ts. */
  evacuations: EvacuationChange;
  /** privacy/tracking-windows.ts (a window written or removed) → every gateway's window cache. */
  'tracking-windows:changed': TrackingWindowChange;
}

/** The gateway's bus: shared/bus's drivers, typed by `Channels`. */
export type Bus = BusOf<Channels>;
