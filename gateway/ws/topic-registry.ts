import { AppError, ValidationError, toErrorBody } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { Storage } from '../../shared/storage/index.js';
import type { Principal } from '../auth/principal.js';
import type { BuildingRegistry } from '../realtime/building-registry.js';
import { ReplayGate } from './replay-gate.js';
import { authorizeTopic, isConfinedTopic, isDeviceTopic, topicKey } from './topics.js';
import type { Connection, WsOptions } from './ws-connection.js';

/**
 * Replays what a subscriber missed (alarms since a seq), from storage, in seq order, before live delivery
 * starts. `confinedTo` is the user a plain user is confined to (confinedUserId): replay only what is about them.
 */
export type ReplayProvider = (
  principal: Principal,
  topic: string,
  sinceSeq: number,
  send: (message: object) => void,
  confinedTo: string | undefined,
) => Promise<void>;

/** The bus subscriptions a topic needs: held while a socket here follows it, resolved once acknowledged. */
export interface TopicInterest {
  holdTopic(topic: string): Promise<(lingerMs?: number) => void>;
}

/** Whether a message on `topic` is for this subscriber: a confined (plain) user gets only what is about them. */
export function visibleTo(connection: Connection, topic: string, data: unknown): boolean {
  if (connection.confinedTo === undefined || !isConfinedTopic(topic)) return true;
  return (data as { user_id?: unknown } | null | undefined)?.user_id === connection.confinedTo;
}

/**
 * Who follows which topic, the one job of this file: subscribe and unsubscribe (keys scoped by organization,
 * at most maxTopics per socket), a subscription resumed with since_seq through its ReplayGate, and the
 * re-check of `devices/{id}` subscriptions when devices change hands. It sends only the frames that answer
 * those; live frames go out through topic-fan-out.ts.
 */
export class TopicRegistry {
  private readonly topics = new Map<string, Set<Connection>>();
  private readonly replays: { pattern: RegExp; provider: ReplayProvider }[] = [];
  /** The interest held for each topic key followed here (or being followed), given back when its last socket leaves. */
  private readonly interests = new Map<string, Promise<(lingerMs?: number) => void>>();

  constructor(
    private readonly services: { logger: Logger; registry: BuildingRegistry; storage: Storage; interest: TopicInterest },
    private readonly options: Pick<WsOptions, 'maxTopics'>,
  ) {}

  registerReplay(pattern: RegExp, provider: ReplayProvider): void {
    this.replays.push({ pattern, provider });
  }

  replayFor(topic: string): ReplayProvider | undefined {
    return this.replays.find((candidate) => candidate.pattern.test(topic))?.provider;
  }

  /** The sockets following a topic key, if any. */
  subscribers(key: string): ReadonlySet<Connection> | undefined {
    return this.topics.get(key);
  }

  get isEmpty(): boolean {
    return this.topics.size === 0;
  }

  /** Whether any socket follows `topic` of the organization (so nothing is presented for nobody). */
  followed(organizationId: string, topic: string): boolean {
    return this.topics.has(topicKey(organizationId, topic));
  }

  tooManyTopics(connection: Connection): AppError {
    const max = this.options.maxTopics;
    const message = `a socket may hold at most ${max} topics (this one holds ${connection.subscriptions.size}): unsubscribe some first`;
    return new ValidationError([{ field: 'topics', message }], 'Too many topics');
  }

  /**
   * Subscribes at once, so that live alarms reach the subscription's ReplayGate while the replay from storage
   * runs; the gate holds them and, when the replay is done, sends those it did not cover, in seq order. One
   * more read after the replay covers alarms pushed live before others committed earlier were pushed.
   */
  async subscribeWithReplay(
    connection: Connection,
    principal: Principal,
    topic: string,
    key: string,
    sinceSeq: number,
    provider: ReplayProvider,
  ): Promise<void> {
    const gate = new ReplayGate(sinceSeq);
    // The gate first: a live alarm may reach the socket as soon as it follows the topic.
    connection.replays.set(key, gate);
    try {
      await this.follow(connection, key);
    } catch (error) {
      if (connection.replays.get(key) === gate) connection.replays.delete(key);
      throw error;
    }
    const send = (frame: object) => {
      if (!visibleTo(connection, topic, (frame as { data?: unknown }).data)) return;
      const fresh = gate.replayed(frame);
      if (fresh) connection.message(fresh);
    };
    try {
      await provider(principal, topic, sinceSeq, send, connection.confinedTo);
      if (gate.holdsNewer && !connection.closed) await provider(principal, topic, gate.upTo, send, connection.confinedTo);
    } catch (error) {
      // A partial replay must not turn into a gap: the client resubscribes from the last seq it got.
      if (connection.replays.get(key) === gate) this.unsubscribe(connection, key);
      throw error;
    }
    // The gate stays: a push of an alarm the replay sent may still arrive, and is dropped there.
    for (const frame of gate.finish()) connection.message(frame);
  }

  /**
   * Follows a topic once the bus subscriptions it needs are acknowledged (a position published after that reaches
   * this socket), then subscribes the socket: the `subscribed` answer comes after both. Alarm topics need none.
   */
  async follow(connection: Connection, key: string): Promise<void> {
    for (;;) {
      let held = this.interests.get(key);
      if (!held) {
        held = this.services.interest.holdTopic(key.slice(key.indexOf('|') + 1));
        this.interests.set(key, held);
        const failed = held;
        held.catch(() => this.interests.get(key) === failed && this.interests.delete(key));
      }
      await held;
      // The last follower left meanwhile and the interest was given back: take it again.
      if (this.interests.get(key) === held) break;
    }
    try {
      this.subscribe(connection, key);
    } catch (error) {
      this.leftBehind(key);
      throw error;
    }
  }

  /** Gives a topic's interest back once no socket here follows it. */
  private leftBehind(key: string): void {
    if (this.topics.has(key)) return;
    const held = this.interests.get(key);
    this.interests.delete(key);
    void held?.then(
      (release) => release(),
      () => undefined,
    );
  }

  subscribe(connection: Connection, key: string): void {
    // Checked again here: several subscribe operations of one socket may be in flight together.
    if (!connection.subscriptions.has(key) && connection.subscriptions.size >= this.options.maxTopics) throw this.tooManyTopics(connection);
    let set = this.topics.get(key);
    if (!set) this.topics.set(key, (set = new Set()));
    set.add(connection);
    connection.subscriptions.add(key);
  }

  unsubscribe(connection: Connection, key: string): void {
    const set = this.topics.get(key);
    set?.delete(connection);
    if (set?.size === 0) this.topics.delete(key);
    connection.subscriptions.delete(key);
    connection.replays.delete(key);
    this.leftBehind(key);
  }

  /** A closed socket leaves every topic it followed. */
  forget(connection: Connection): void {
    for (const key of connection.subscriptions) this.topics.get(key)?.delete(connection);
    for (const key of connection.subscriptions) if (this.topics.get(key)?.size === 0) this.topics.delete(key);
    for (const key of connection.subscriptions) this.leftBehind(key);
  }

  /**
   * Checks the `devices/{id}` subscriptions of an organization (every organization: undefined) again against
   * the devices' owners now (a phone handed to someone else, a device deleted): a subscription its socket may
   * no longer hold is dropped, and the socket told with an `unsubscribed` frame and the reason. Until then the
   * topic's frames are confined by user (CONFINED_TOPIC), so nothing of the new owner's leaks meanwhile.
   */
  async recheckDeviceSubscriptions(organizationId?: string): Promise<void> {
    const checks: Promise<void>[] = [];
    for (const [key, subscribers] of this.topics) {
      const split = key.indexOf('|');
      const organization = key.slice(0, split);
      const topic = key.slice(split + 1);
      if ((organizationId !== undefined && organization !== organizationId) || !isDeviceTopic(topic)) continue;
      for (const connection of subscribers) {
        const principal = connection.principal;
        if (!principal) continue;
        checks.push(
          authorizeTopic(topic, principal, this.services.registry, this.services.storage).catch((error: unknown) => {
            if (!(error instanceof AppError)) {
              return this.services.logger.warn(
                { err: error, topic },
                're-checking a device subscription failed; it stays confined by user',
              );
            }
            if (connection.closed || !connection.subscriptions.has(key)) return;
            this.unsubscribe(connection, key);
            connection.message({ op: 'unsubscribed', topics: [topic], reason: error.message, status: toErrorBody(error).status });
          }),
        );
      }
    }
    await Promise.all(checks);
  }
}
