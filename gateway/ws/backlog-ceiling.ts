import { wsSlowConsumerDisconnects } from '../../shared/metrics/metrics.js';
import { WS_CLOSE, type Connection } from './ws-connection.js';

/**
 * A ceiling on the bytes waiting to be sent over all of a gateway's sockets. Each socket has its own limits
 * (ws-connection.ts), but many slow sockets together could still hold the process's memory: past the ceiling,
 * the sockets with the largest backlogs are closed (4008, as a slow consumer: alarms resume with since_seq)
 * until the total is under it again. A sweep, every `intervalMs` while sockets are open.
 */
export class BacklogCeiling {
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly connections: () => Iterable<Connection>,
    private readonly maxTotalBytes: number,
    private readonly intervalMs = 200,
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.enforce(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Closes the largest backlogs while the total is over the ceiling; returns how many sockets it closed. */
  enforce(): number {
    const backlogs: [Connection, number][] = [];
    let total = 0;
    for (const connection of this.connections()) {
      if (connection.closed) continue;
      const buffered = connection.ws.getBufferedAmount();
      if (buffered === 0) continue;
      backlogs.push([connection, buffered]);
      total += buffered;
    }
    if (total <= this.maxTotalBytes) return 0;
    backlogs.sort((a, b) => b[1] - a[1]);
    let closed = 0;
    for (const [connection, buffered] of backlogs) {
      if (total <= this.maxTotalBytes) break;
      wsSlowConsumerDisconnects.inc();
      connection.close(WS_CLOSE.slowConsumer, "slow consumer: the server's send backlog is full");
      total -= buffered;
      closed++;
    }
    return closed;
  }
}
