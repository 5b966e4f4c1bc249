import type { EvacuationChange } from './evacuation-model.js';
import type { Alarm, PositionFeature } from './model.js';

/** `lostAt`: when the link was last known good (ms since the epoch): the data on screen is that old. */
export type ConnectionState =
  | { kind: 'connecting'; lostAt?: number }
  | { kind: 'live' }
  | { kind: 'reconnecting'; attempt: number; retryAt: number; lostAt: number }
  | { kind: 'offline'; lostAt: number }
  | { kind: 'stopped' };

export interface LiveHandlers {
  state(state: ConnectionState): void;
  position(feature: PositionFeature): void;
  alarm(alarm: Alarm, replayed: boolean): void;
  /** The credentials were refused: the session is over. */
  unauthorized(message: string): void;
  /** Subscribed again after a drop (positions missed meanwhile should be fetched). */
  resumed(): void;
  /** A change of the shown building's evacuation (given only to those who may follow the roll). */
  evacuation?(change: EvacuationChange, replayed: boolean): void;
}

const ALARMS_TOPIC = 'organization/alarms';
const positionsTopic = (buildingId: number) => `buildings/${buildingId}/positions`;
const evacuationTopic = (buildingId: number) => `buildings/${buildingId}/evacuation`;
/** Backoff: 0.5 s doubling to 15 s, with ±25 % jitter so a room of screens does not reconnect in step. */
const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 15_000;
/** A ping this often; a socket that says nothing for SILENCE_LIMIT_MS is taken as dead (half-open TCP). */
const PING_EVERY_MS = 15_000;
const SILENCE_LIMIT_MS = 40_000;

/**
 * The console's one WebSocket: authenticates with a first `auth` message (the token never goes in the URL),
 * subscribes to the organization's alarms with `since_seq` = the last seq seen, so that after a drop the
 * server replays everything raised or changed meanwhile, and to the shown building's positions. It
 * reconnects by itself with backoff, at once when the browser comes back online.
 */
export class LiveSocket {
  private ws: WebSocket | undefined;
  private attempt = 0;
  private retryTimer: number | undefined;
  private pingTimer: number | undefined;
  private lastHeard = 0;
  /** Set when a subscribed link drops, cleared when live again: the age of what the console shows. */
  private lostAt: number | undefined;
  private stopped = false;
  private everSubscribed = false;
  private building: number | null = null;
  /** The newest roll seq seen of the watched building's evacuation: a resubscription replays what came after it. */
  private evacuationSeq = 0;
  private readonly onOnline = () => this.reconnectNow();
  private readonly onOffline = () =>
    this.ws?.readyState !== WebSocket.OPEN && this.handlers.state({ kind: 'offline', lostAt: this.markLost() });

  constructor(
    private readonly token: string,
    private lastSeq: number,
    private readonly handlers: LiveHandlers,
  ) {}

  get sinceSeq(): number {
    return this.lastSeq;
  }

  start(): void {
    window.addEventListener('online', this.onOnline);
    window.addEventListener('offline', this.onOffline);
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    window.removeEventListener('online', this.onOnline);
    window.removeEventListener('offline', this.onOffline);
    window.clearTimeout(this.retryTimer);
    window.clearInterval(this.pingTimer);
    this.discard(1000, 'signed out');
    this.handlers.state({ kind: 'stopped' });
  }

  /** Follows one building's positions and evacuation (null: none). */
  watchBuilding(buildingId: number | null): void {
    if (buildingId === this.building) return;
    const previous = this.building;
    this.building = buildingId;
    this.evacuationSeq = 0;
    if (!this.ready()) return; // subscribed on the next (re)connection
    if (previous !== null)
      this.send({
        op: 'unsubscribe',
        topics: [positionsTopic(previous), ...(this.handlers.evacuation ? [evacuationTopic(previous)] : [])],
      });
    if (buildingId !== null) this.subscribeBuilding(buildingId);
  }

  /** The building's positions, and its evacuation roll (replayed after the last seq seen; 0: the whole roll). */
  private subscribeBuilding(buildingId: number): void {
    this.send({ op: 'subscribe', topics: [positionsTopic(buildingId)], id: 'positions' });
    if (this.handlers.evacuation)
      this.send({ op: 'subscribe', topics: [evacuationTopic(buildingId)], since_seq: this.evacuationSeq, id: 'evacuation' });
  }

  private authenticated = false;

  private ready(): boolean {
    return this.authenticated && this.ws?.readyState === WebSocket.OPEN;
  }

  private connect(): void {
    if (this.stopped) return;
    window.clearTimeout(this.retryTimer);
    this.handlers.state({ kind: 'connecting', lostAt: this.lostAt });
    // A control room follows every device of a building: one frame per upload rather than per position.
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/api/v1/ws?positions=batched`;
    let ws: WebSocket;
    try {
      ws = new WebSocket(url);
    } catch {
      return this.scheduleReconnect();
    }
    this.ws = ws;
    this.authenticated = false;
    this.lastHeard = Date.now();
    ws.onopen = () => {
      this.lastHeard = Date.now();
      this.send({ op: 'auth', token: this.token, id: 'auth' });
    };
    ws.onmessage = (event) => this.receive(event.data);
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = undefined;
      this.authenticated = false;
      this.scheduleReconnect();
    };
    ws.onerror = () => undefined; // a close event follows; it decides
    window.clearInterval(this.pingTimer);
    this.pingTimer = window.setInterval(() => this.heartbeat(), PING_EVERY_MS);
  }

  private heartbeat(): void {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return;
    if (Date.now() - this.lastHeard > SILENCE_LIMIT_MS) {
      this.markLost(this.lastHeard); // half-open: nothing has come since we last heard from it
      this.discard(4000, 'silent');
      this.scheduleReconnect();
      return;
    }
    this.send({ op: 'ping' });
  }

  private receive(data: unknown): void {
    this.lastHeard = Date.now();
    if (typeof data !== 'string') return; // we never ask for msgpack
    let frame: { op?: string; id?: unknown; status?: number; message?: string; data?: unknown; replay?: boolean; topic?: string };
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    switch (frame.op) {
      case 'authenticated':
        this.authenticated = true;
        this.send({ op: 'subscribe', topics: [ALARMS_TOPIC], since_seq: this.lastSeq, id: 'alarms' });
        if (this.building !== null) this.subscribeBuilding(this.building);
        break;
      case 'subscribed':
        // The alarm subscription answers after its replay: from here on the inbox is complete.
        if (frame.id === 'alarms') {
          const resumed = this.everSubscribed;
          this.everSubscribed = true;
          this.attempt = 0;
          this.lostAt = undefined;
          this.handlers.state({ kind: 'live' });
          if (resumed) this.handlers.resumed();
        }
        break;
      case 'alarm': {
        const alarm = frame.data as Alarm;
        if (typeof alarm?.seq === 'number') this.lastSeq = Math.max(this.lastSeq, alarm.seq);
        this.handlers.alarm(alarm, frame.replay === true);
        break;
      }
      case 'evacuation': {
        const change = frame.data as EvacuationChange;
        if (change?.building_id !== this.building) break; // a frame of the building shown before
        if (typeof change.seq === 'number') this.evacuationSeq = Math.max(this.evacuationSeq, change.seq);
        this.handlers.evacuation?.(change, frame.replay === true);
        break;
      }
      case 'position':
        this.handlers.position(frame.data as PositionFeature);
        break;
      case 'positions':
        for (const feature of frame.data as PositionFeature[]) this.handlers.position(feature);
        break;
      case 'error':
        if (frame.id === 'auth' || (frame.status === 401 && !this.authenticated)) {
          this.stopped = true;
          this.discard(1000, 'unauthorized');
          this.handlers.unauthorized(frame.message ?? 'Your session has ended');
        } else console.warn('floorcast live:', frame.status, frame.message, frame.topic ?? '');
        break;
      default:
        break;
    }
  }

  private send(message: object): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(message));
  }

  /** Forgets the current socket (its late events are ignored) and closes it. */
  private discard(code: number, reason: string): void {
    const ws = this.ws;
    this.ws = undefined;
    this.authenticated = false;
    if (!ws) return;
    ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
    try {
      ws.close(code, reason);
    } catch {
      // already closing
    }
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    window.clearTimeout(this.retryTimer);
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** this.attempt) * (0.75 + Math.random() * 0.5);
    this.attempt += 1;
    const lostAt = this.markLost();
    if (!navigator.onLine) this.handlers.state({ kind: 'offline', lostAt });
    else this.handlers.state({ kind: 'reconnecting', attempt: this.attempt, retryAt: Date.now() + delay, lostAt });
    this.retryTimer = window.setTimeout(() => this.connect(), delay);
  }

  /** Notes when the link was lost (the first drop since it was last live counts) and returns it. */
  private markLost(at = Date.now()): number {
    this.lostAt ??= at;
    return this.lostAt;
  }

  /** The network is back: drop any attempt still hanging from the offline spell and connect at once. */
  private reconnectNow(): void {
    if (this.stopped || this.ws?.readyState === WebSocket.OPEN) return;
    this.discard(1000, 'reconnecting');
    this.attempt = 0;
    this.connect();
  }
}
