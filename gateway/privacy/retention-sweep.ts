import type { Logger } from '../../shared/logger.js';
import { expireAll, type RetentionDays } from '../../shared/privacy/retention.js';
import type { Storage } from '../../shared/storage/index.js';

/**
 * The hourly retention pass (issue 32): every organization's data past its periods goes, in bounded batches
 * (shared/privacy/retention.ts). Every gateway runs it; two at once delete each row once.
 */
export class RetentionSweep {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(
    private readonly storage: Pick<Storage, 'execute' | 'kind'>,
    private readonly maxima: RetentionDays,
    private readonly logger: Logger,
    private readonly batchSize = 5000,
  ) {}

  /** One pass; a pass already under way is joined, not doubled. */
  sweep(now = Date.now()): Promise<void> {
    this.running ??= expireAll(this.storage, this.maxima, now, this.batchSize)
      .then((expired) => {
        for (const [organizationId, counts] of expired) this.logger.info({ organizationId, counts }, 'expired data past retention');
      })
      .catch((error) => this.logger.warn({ err: error }, 'retention sweep failed'))
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  start(intervalMs = 3600_000): void {
    void this.sweep();
    this.timer ??= setInterval(() => void this.sweep(), intervalMs).unref();
  }

  /** Stops the timer and waits for a pass under way. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
