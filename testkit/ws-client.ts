import { Packr } from 'msgpackr';
import WebSocket from 'ws';

const packr = new Packr({ useRecords: false });

/** A test WebSocket client that records every frame and can wait for one matching a predicate. */
export class TestSocket {
  readonly frames: any[] = [];
  closeCode?: number;
  closeReason?: string;
  /** The client's error, if the connection failed (a 1006 close says why here). */
  error?: Error;
  private waiters: { predicate: (frame: any) => boolean; resolve: (frame: any) => void }[] = [];
  private closeWaiters: (() => void)[] = [];

  private constructor(
    readonly ws: WebSocket,
    readonly binary: boolean,
  ) {
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      const frame = isBinary ? packr.unpack(data) : JSON.parse(data.toString());
      this.frames.push(frame);
      for (const waiter of [...this.waiters]) {
        if (waiter.predicate(frame)) {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          waiter.resolve(frame);
        }
      }
    });
    ws.on('error', (error) => {
      this.error ??= error;
    });
    ws.on('close', (code, reason) => {
      this.closeCode = code;
      this.closeReason = reason.toString();
      for (const waiter of this.closeWaiters.splice(0)) waiter();
    });
  }

  static open(baseUrl: string, options: { headers?: Record<string, string>; protocol?: string; query?: string } = {}): Promise<TestSocket> {
    const url = `${baseUrl.replace(/^http/, 'ws')}/api/v1/ws${options.query ? `?${options.query}` : ''}`;
    const ws = new WebSocket(url, options.protocol ? [options.protocol] : [], { headers: options.headers });
    const socket = new TestSocket(ws, options.protocol === 'msgpack');
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(socket));
      ws.once('unexpected-response', (_req, res) =>
        reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { statusCode: res.statusCode })),
      );
      ws.once('error', reject);
    });
  }

  send(message: object): void {
    this.ws.send(this.binary ? packr.pack(message) : JSON.stringify(message));
  }

  /** Resolves with the first frame (already received or future) that matches; rejects after `timeoutMs`. */
  next(predicate: (frame: any) => boolean, timeoutMs = 5000): Promise<any> {
    const seen = this.frames.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no matching frame within ${timeoutMs} ms; got ${JSON.stringify(this.frames.slice(-5))}`)),
        timeoutMs,
      );
      this.waiters.push({ predicate, resolve: (frame) => (clearTimeout(timer), resolve(frame)) });
    });
  }

  /** Sends an operation with an id and waits for the reply carrying that id. */
  async request(message: object, timeoutMs = 5000): Promise<any> {
    const id = Math.random().toString(36).slice(2);
    this.send({ ...message, id });
    return this.next((frame) => frame.id === id, timeoutMs);
  }

  closed(timeoutMs = 10_000): Promise<void> {
    if (this.closeCode !== undefined) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('socket not closed in time')), timeoutMs);
      this.closeWaiters.push(() => (clearTimeout(timer), resolve()));
    });
  }

  close(): void {
    this.ws.close();
  }
}
