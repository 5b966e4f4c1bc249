import { isOutageError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';

/** What the watch tells detection (gateway/detection/detection-engine.ts). */
export interface WatchedDetection {
  interrupt(): void;
  resumeAll(at: number): void;
}

/**
 * Tells detection when storage is out of reach and when it is back. While PostgreSQL is out, uploads are refused
 * (503): devices fall quiet because of us, not of themselves, so the dead-man silence and the stays must not run
 * on; once it answers again, every building resumes from that moment (`DetectionEngine.resumeAll`). One cheap
 * ping per period; only an outage error interrupts (a slow answer under load says nothing either way).
 */
export class StorageWatch {
  private timer?: NodeJS.Timeout;
  private out = false;
  private probing?: Promise<void>;

  constructor(
    private readonly ping: () => Promise<void>,
    private readonly detection: WatchedDetection,
    private readonly logger: Logger,
    private readonly clock: () => number = Date.now,
  ) {}

  start(periodMs = 1000): void {
    this.timer = setInterval(() => void this.probe(), periodMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One probe (one at a time); resolves once detection has been told what it found. */
  probe(): Promise<void> {
    this.probing ??= this.ping()
      .then(
        () => {
          if (!this.out) return;
          this.out = false;
          this.detection.resumeAll(this.clock());
          this.logger.info('storage is back: dead-man silence and stays are judged from now');
        },
        (error) => {
          if (this.out || !isOutageError(error)) return;
          this.out = true;
          this.detection.interrupt();
          this.logger.warn({ err: error }, 'storage out of reach: dead-man silence and stays wait for it');
        },
      )
      .finally(() => (this.probing = undefined));
    return this.probing;
  }
}
