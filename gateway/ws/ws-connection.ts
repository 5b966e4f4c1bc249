import type { Principal } from '../auth/principal.js';
import { toErrorBody } from '../../shared/errors.js';
import { wsCoalescedPositions, wsSlowConsumerDisconnects } from '../../shared/metrics/metrics.js';
import type { TopicEvents } from './event-frames.js';
import { positionFrame, positionsFrame, type LivePosition, type TopicPositions } from './position-frames.js';
import type { ReplayGate } from './replay-gate.js';
import { encode, type WireFormat } from './ws-codec.js';

/** The WebSocket side's limits (from config.ts), declared beside the connection that enforces its buffer ones. */
export interface WsOptions {
  authTimeoutMs: number;
  maxMessageBytes: number;
  coalesceBytes: number;
  maxBufferBytes: number;
  maxTopics: number;
  maxInFlight: number;
  maxUnauthenticatedPerAddress: number;
  /** Every authenticated socket is checked against storage this often (0: never; tests). */
  revalidateMs: number;
  /** Per-socket limit of unsent position and event frames (alarms have maxBufferBytes). */
  maxFeedBufferBytes: number;
  /** Unsent bytes over all sockets; past it the largest backlogs are closed. */
  maxTotalBacklogBytes: number;
  maxSocketsPerUser: number;
  maxSocketsPerCredential: number;
  maxSocketsPerAddress: number;
}

export const WS_CLOSE = {
  unauthenticated: 4401,
  slowConsumer: 4008,
  goingAway: 1001,
  messageTooBig: 1009,
  internalError: 1011,
  /** Messages may have been missed (the bus was away): reconnect and resume with since_seq. */
  resume: 1012,
} as const;

/** The close code and reason sent to the sockets a revocation ends. */
export const CREDENTIAL_REVOKED = { code: WS_CLOSE.unauthenticated, reason: 'credential revoked' } as const;
/** The close code and reason sent to a socket whose token expires while it is open. */
export const TOKEN_EXPIRED = { code: WS_CLOSE.unauthenticated, reason: 'token expired' } as const;

export interface SocketData {
  connection?: Connection;
  format: WireFormat;
  principal?: Principal;
  /** The remote address, when the socket counts against its address's quota of unauthenticated sockets. */
  unauthenticatedAddress?: string;
  /** The client's address (quotas of sockets per address). */
  address: string;
  /** Gives back the socket quotas the upgrade took (socket-quotas.ts), once the socket closes. */
  releaseQuota?: () => void;
  /** When the bearer token the upgrade authenticated with expires (epoch ms). */
  expiresAt?: number;
  /** Opened with `?positions=batched`: a batch's positions for a topic come in one frame. */
  batchedPositions: boolean;
  /** Opened with `?events=batched`: a bus message's geofence events (or event-area contents) for a topic come in one frame. */
  batchedEvents: boolean;
}

/** The part of a uWS WebSocket a connection uses (a test can stand in for it). */
export interface SocketLike {
  getBufferedAmount(): number;
  send(message: string | Buffer, isBinary?: boolean): number;
  cork(callback: () => void): unknown;
  end(code?: number, reason?: string): void;
}

/** A live position waiting, while its subscriber is behind, to be sent: the latest per topic and device wins. */
interface PendingPosition {
  topic: string;
  position: LivePosition;
}

/**
 * One socket: its subscriptions and, when it falls behind, the latest position per device waiting to go.
 * `batched` sockets (opened with `?positions=batched`) get a batch's positions for a topic in one frame,
 * `batchedEvents` ones (`?events=batched`) a bus message's events for a topic.
 */
export class Connection {
  readonly subscriptions = new Set<string>();
  readonly pending = new Map<string, PendingPosition>();
  /** Subscriptions resumed with since_seq, by topic key: replay and live alarms meet there (see ReplayGate). */
  readonly replays = new Map<string, ReplayGate>();
  principal?: Principal;
  /** The user a plain user's topics are confined to (confinedUserId); undefined sees the organization. */
  confinedTo?: string;
  /** Set while the socket holds a slot of its address's unauthenticated quota. */
  unauthenticatedAddress?: string;
  authTimer?: NodeJS.Timeout;
  /** The client's address, and the quotas of sockets this one holds once authenticated (socket-quotas.ts). */
  address = '';
  releaseQuota?: () => void;
  /** Closes the socket when the token it authenticated with expires (socket-revalidation.ts). */
  expiryTimer?: NodeJS.Timeout;
  closed = false;
  inFlight = 0;

  constructor(
    readonly ws: SocketLike,
    readonly format: WireFormat,
    private readonly options: Pick<WsOptions, 'coalesceBytes' | 'maxBufferBytes'> & Partial<Pick<WsOptions, 'maxFeedBufferBytes'>>,
    readonly batched = false,
    readonly batchedEvents = false,
  ) {}

  /**
   * Sends a frame that is never coalesced (alarms, geofence events, acks): it is always queued. Past the hard
   * limit the subscriber is disconnected, saying why: it can resume alarms with since_seq.
   */
  send(payload: string | Buffer): void {
    if (this.closed || this.overLimit()) return;
    this.ws.cork(() => this.ws.send(payload, typeof payload !== 'string'));
  }

  /**
   * Geofence events or event-area contents, several topics' worth, in one write (one cork): a frame per topic
   * on a `batchedEvents` socket, else a frame per event. Never coalesced; past the feeds' limit (smaller than
   * the alarms': a socket that cannot keep up with events must not hold memory for them) the subscriber is
   * disconnected, as for `send`.
   */
  sendEvents(groups: readonly TopicEvents[]): void {
    if (this.closed || groups.length === 0) return;
    const binary = this.format === 'msgpack';
    this.ws.cork(() => {
      for (const group of groups) {
        if (this.batchedEvents) {
          if (this.overLimit(this.ws.getBufferedAmount(), this.feedLimit)) return;
          this.ws.send(group.batch(this.format), binary);
          continue;
        }
        for (let index = 0; index < group.events.length; index++) {
          if (this.overLimit(this.ws.getBufferedAmount(), this.feedLimit)) return;
          this.ws.send(group.single(this.format, index), binary);
        }
      }
    });
  }

  /**
   * Live positions, several topics' worth, in one write (one cork). While the socket is behind, or positions
   * already wait, they go to `pending` instead, replaced by newer ones of the same device and topic, so a
   * device's positions never overtake each other.
   */
  sendPositions(groups: readonly TopicPositions[]): void {
    if (this.closed || groups.length === 0) return;
    this.ws.cork(() => {
      for (const group of groups) {
        if (this.batched) {
          const room = this.room();
          if (room === 'closed') return;
          if (room === 'behind') this.hold(group, 0);
          else this.ws.send(group.batch(this.format), this.format === 'msgpack');
          continue;
        }
        for (let index = 0; index < group.positions.length; index++) {
          const room = this.room();
          if (room === 'closed') return;
          if (room === 'behind') this.hold(group, index, index + 1);
          else this.ws.send(group.single(this.format, index), this.format === 'msgpack');
        }
      }
    });
  }

  /**
   * What a live position may do now: go out; wait (`behind`: the backlog is past the coalescing threshold, or
   * older positions already wait); or nothing, the socket having just been closed for passing the hard limit.
   */
  private room(): 'send' | 'behind' | 'closed' {
    const buffered = this.ws.getBufferedAmount();
    if (this.overLimit(buffered, this.feedLimit)) return 'closed';
    return this.pending.size > 0 || buffered > this.options.coalesceBytes ? 'behind' : 'send';
  }

  private hold(group: TopicPositions, from: number, to = group.positions.length): void {
    for (let index = from; index < to; index++) {
      const position = group.positions[index]!;
      const key = `${group.topic}|${position.deviceId}`;
      // Re-inserted so the newest goes last; the one it replaces will never be sent.
      if (this.pending.delete(key)) wsCoalescedPositions.inc();
      this.pending.set(key, { topic: group.topic, position });
    }
  }

  /** The limit of position and event frames: the feeds' own when set, never above the alarms'. */
  private get feedLimit(): number {
    return Math.min(this.options.maxFeedBufferBytes ?? Infinity, this.options.maxBufferBytes);
  }

  /** Past `limit` buffered bytes (the alarms' limit unless told), the subscriber is disconnected (4008). */
  private overLimit(buffered = this.ws.getBufferedAmount(), limit = this.options.maxBufferBytes): boolean {
    if (buffered <= limit) return false;
    if (!this.closed) wsSlowConsumerDisconnects.inc();
    this.close(WS_CLOSE.slowConsumer, 'slow consumer: send buffer limit exceeded');
    return true;
  }

  message(message: object): void {
    this.send(encode(this.format, message));
  }

  error(error: unknown, extra: Record<string, unknown> = {}): void {
    this.message({ op: 'error', ...extra, ...toErrorBody(error) });
  }

  /**
   * Called by uWS when the socket has room again: sends the waiting positions while it stays under the
   * threshold (a batched socket gets them as one frame per topic).
   */
  drain(): void {
    if (this.closed || this.ws.getBufferedAmount() > this.options.coalesceBytes) return;
    if (this.batched) {
      const byTopic = new Map<string, LivePosition[]>();
      for (const { topic, position } of this.pending.values()) {
        const positions = byTopic.get(topic);
        if (positions) positions.push(position);
        else byTopic.set(topic, [position]);
      }
      this.pending.clear();
      this.ws.cork(() => {
        for (const [topic, positions] of byTopic) this.ws.send(positionsFrame(this.format, topic, positions), this.format === 'msgpack');
      });
      return;
    }
    for (const [key, { topic, position }] of this.pending) {
      if (this.closed || this.ws.getBufferedAmount() > this.options.coalesceBytes) return;
      this.pending.delete(key);
      this.ws.send(positionFrame(this.format, topic, position), this.format === 'msgpack');
    }
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.ws.end(code, reason);
    } catch {
      // already gone
    }
  }
}
