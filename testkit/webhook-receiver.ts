import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Receipt {
  path: string;
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  /** The status the receiver answered. */
  status: number;
}

/**
 * A local webhook receiver on 127.0.0.1: records every request, and answers each with what `respond` says
 * (default 204). Tests make it fail the first attempts, fail everything, or redirect.
 */
export class WebhookReceiver {
  readonly receipts: Receipt[] = [];
  respond: (receipt: Omit<Receipt, 'status'>, attemptOfId: number) => number = () => 204;
  private readonly server: Server;

  private constructor() {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const receipt = {
          path: request.url ?? '/',
          id: String(request.headers['webhook-id'] ?? ''),
          timestamp: String(request.headers['webhook-timestamp'] ?? ''),
          signature: String(request.headers['webhook-signature'] ?? ''),
          body: Buffer.concat(chunks).toString('utf8'),
        };
        const attempt = this.receipts.filter((seen) => seen.id === receipt.id).length + 1;
        const status = this.respond(receipt, attempt);
        this.receipts.push({ ...receipt, status });
        response.writeHead(status, status >= 300 && status < 400 ? { location: 'http://127.0.0.1:9/' } : {});
        response.end();
      });
    });
  }

  static async start(): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    await new Promise<void>((resolve) => receiver.server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  url(path = '/'): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}${path}`;
  }

  /**
   * Receipts of one path answered 2xx, each delivery once, as a receiver keeps them: deliveries are at least once,
   * and one sent again (its success not yet recorded when a gateway stopped, say) has the same `webhook-id`.
   */
  deliveredOnce(path: string): Receipt[] {
    const seen = new Set<string>();
    return this.delivered(path).filter((receipt) => !seen.has(receipt.id) && seen.add(receipt.id));
  }

  /** Receipts of one path that were answered 2xx. */
  delivered(path: string): Receipt[] {
    return this.receipts.filter((receipt) => receipt.path === path && receipt.status >= 200 && receipt.status < 300);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
