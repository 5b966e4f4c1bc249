import type { Principal } from '../auth/principal.js';
import { toErrorBody } from '../../shared/errors.js';
import { encode, type WireFormat } from './ws-codec.js';
import type { WsOptions } from './ws-gateway.js';

export const WS_CLOSE = { unauthenticated: 4401, slowConsumer: 4008, goingAway: 1001 } as const;

export interface SocketData {
  connection?: Connection;
  format: WireFormat;
  principal?: Principal;
}

/** The part of a uWS WebSocket a connection uses (a test can stand in for it). */
export interface SocketLike {
  getBufferedAmount(): number;
  send(message: string | Buffer, isBinary?: boolean): number;
  cork(callback: () => void): unknown;
  end(code?: number, reason?: string): void;
}

/** An encoded frame and, for a live position, the key it coalesces under. */
export type OutgoingFrame = readonly [payload: string | Buffer, coalesceKey?: string];

/** One socket: its subscriptions and, when it falls behind, the latest position per device waiting to go. */
export class Connection {
  readonly subscriptions = new Set<string>();
  readonly pending = new Map<string, string | Buffer>();
  principal?: Principal;
  authTimer?: NodeJS.Timeout;
  closed = false;
  inFlight = 0;

  constructor(
    readonly ws: SocketLike,
    readonly format: WireFormat,
    private readonly options: Pick<WsOptions, 'coalesceBytes' | 'maxBufferBytes'>,
  ) {}

  /**
   * Sends a frame. A coalescible frame (a live position, keyed by device) waits in `pending`, replaced by
   * newer ones, while the socket is behind; anything else (alarms, acks) is always queued. Past the hard
   * limit the subscriber is disconnected, saying why: it can resume alarms with since_seq.
   */
  send(payload: string | Buffer, coalesceKey?: string): void {
    if (this.closed) return;
    this.ws.cork(() => this.sendCorked(payload, coalesceKey));
  }

  /** Several frames in one write (one cork): a batch of positions costs a subscriber one syscall, not one per frame. */
  sendAll(frames: readonly OutgoingFrame[]): void {
    if (this.closed || frames.length === 0) return;
    this.ws.cork(() => {
      for (const [payload, coalesceKey] of frames) this.sendCorked(payload, coalesceKey);
    });
  }

  private sendCorked(payload: string | Buffer, coalesceKey: string | undefined): void {
    if (this.closed) return;
    const buffered = this.ws.getBufferedAmount();
    if (buffered > this.options.maxBufferBytes) {
      this.close(WS_CLOSE.slowConsumer, 'slow consumer: send buffer limit exceeded');
      return;
    }
    if (coalesceKey !== undefined && (buffered > this.options.coalesceBytes || this.pending.size > 0)) {
      this.pending.delete(coalesceKey); // re-insert so the newest goes last
      this.pending.set(coalesceKey, payload);
      return;
    }
    this.ws.send(payload, typeof payload !== 'string');
  }

  message(message: object, coalesceKey?: string): void {
    this.send(encode(this.format, message), coalesceKey);
  }

  error(error: unknown, extra: Record<string, unknown> = {}): void {
    this.message({ op: 'error', ...extra, ...toErrorBody(error) });
  }

  /** Called by uWS when the socket has room again: drain coalesced positions while it stays under the threshold. */
  drain(): void {
    for (const [key, payload] of this.pending) {
      if (this.closed || this.ws.getBufferedAmount() > this.options.coalesceBytes) return;
      this.pending.delete(key);
      this.ws.send(payload, typeof payload !== 'string');
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

