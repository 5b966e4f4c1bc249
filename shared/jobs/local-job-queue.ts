import { AppError, JobFailedError } from '../errors.js';
import type { JobQueue, JobRequest, ProcessorContext, ProcessorRegistry, ScheduleOptions } from './job-queue.js';
import { jobTimeoutError, type JobLimits } from './job-queue.js';

interface PendingJob {
  request: JobRequest;
  limits: JobLimits;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  settled: boolean;
}

/**
 * In-process job runner for single-node deployments. Queues are kept per organization; the next job comes
 * from the waiting organization with the fewest jobs running, ties going to the one served least recently, so a burst of one
 * organization's reports cannot starve another's.
 */
export class LocalJobQueue implements JobQueue {
  readonly kind = 'local' as const;
  private readonly queues = new Map<string, PendingJob[]>();
  /** Organizations with queued work, in the order they will be served next. */
  private readonly turn: string[] = [];
  private running = 0;
  private readonly runningByOrganization = new Map<string, number>();
  /** Organization -> tick of its last job start; organizations never served count as 0. */
  private readonly lastStarted = new Map<string, number>();
  private ticks = 0;
  private closed = false;
  /** Delayed jobs not yet queued: dropped on close (their owners re-schedule them from storage at boot). */
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly context: ProcessorContext;

  constructor(
    private readonly processors: ProcessorRegistry,
    context: ProcessorContext,
    private readonly concurrency: number,
  ) {
    this.context = { ...context, schedule: (job, options) => this.schedule(job, options) };
  }

  async schedule(request: JobRequest, options: ScheduleOptions = {}): Promise<void> {
    if (this.closed) throw new Error('job queue is closed');
    if (!this.processors[request.name]) throw new Error(`no processor named ${request.name}`);
    const start = () => {
      if (this.closed) return;
      // Nobody waits for the result; a failure is the processor's to record, and is logged here.
      this.run(request, 2 ** 31 - 1).catch((error) => this.context.logger.warn({ err: error, job: request.name }, 'scheduled job failed'));
    };
    const delay = Math.max(0, options.delayMs ?? 0);
    if (delay === 0) return start();
    const timer = setTimeout(
      () => {
        this.timers.delete(timer);
        start();
      },
      Math.min(delay, 2 ** 31 - 1),
    );
    timer.unref();
    this.timers.add(timer);
  }

  run<T>(request: JobRequest, timeoutMs: number): Promise<T> {
    if (this.closed) return Promise.reject(new Error('job queue is closed'));
    if (!this.processors[request.name]) return Promise.reject(new Error(`no processor named ${request.name}`));
    return new Promise<T>((resolve, reject) => {
      // The signal tells a running processor that its caller gave up, so it cancels its database work; raised
      // after the caller's rejection, so a processor that stops at once cannot answer in its place.
      const controller = new AbortController();
      const job: PendingJob = {
        request,
        limits: { deadline: Date.now() + timeoutMs, signal: controller.signal },
        resolve: resolve as (v: unknown) => void,
        reject,
        settled: false,
      };
      const timer = setTimeout(() => {
        const error = jobTimeoutError(timeoutMs);
        settle(job, () => reject(error));
        controller.abort(error);
      }, timeoutMs);
      job.resolve = (value) => settle(job, () => (clearTimeout(timer), resolve(value as T)));
      job.reject = (error) => settle(job, () => (clearTimeout(timer), reject(error)));
      // A job that data cannot survive as JSON would fail on BullMQ; fail it here too, identically.
      request = { ...request, data: JSON.parse(JSON.stringify(request.data ?? null)) };
      job.request = request;
      const queue = this.queues.get(request.organizationId);
      if (queue) queue.push(job);
      else {
        this.queues.set(request.organizationId, [job]);
        this.turn.push(request.organizationId);
      }
      this.pump();
    });
  }

  private next(): PendingJob | undefined {
    while (this.turn.length > 0) {
      let chosen = 0;
      for (let i = 1; i < this.turn.length; i++) {
        if (this.rank(this.turn[i]!) < this.rank(this.turn[chosen]!)) chosen = i;
      }
      const [organizationId] = this.turn.splice(chosen, 1) as [string];
      const queue = this.queues.get(organizationId)!;
      const job = queue.shift()!;
      if (queue.length > 0) this.turn.push(organizationId);
      else this.queues.delete(organizationId);
      if (job.settled) continue; // a job that already timed out is skipped
      this.lastStarted.set(organizationId, ++this.ticks);
      return job;
    }
    return undefined;
  }

  /** Lower runs first: fewest running jobs, then least recently served. */
  private rank(organizationId: string): number {
    return this.runningOf(organizationId) * 1e12 + (this.lastStarted.get(organizationId) ?? 0);
  }

  private runningOf(organizationId: string): number {
    return this.runningByOrganization.get(organizationId) ?? 0;
  }

  private pump(): void {
    while (this.running < this.concurrency) {
      const job = this.next();
      if (!job) return;
      const organizationId = job.request.organizationId;
      this.running += 1;
      this.runningByOrganization.set(organizationId, this.runningOf(organizationId) + 1);
      const processor = this.processors[job.request.name]!;
      processor(job.request.data, this.context, job.limits)
        // Round-trip the result through JSON so in-process and BullMQ results look the same.
        .then((result) => job.resolve(result === undefined ? null : JSON.parse(JSON.stringify(result))))
        .catch((error) => {
          if (error instanceof AppError) return job.reject(error);
          // Same contract as the BullMQ worker: details go to the log, the caller gets an internal error.
          this.context.logger.error({ err: error, job: job.request.name }, 'job failed');
          job.reject(new JobFailedError());
        })
        .finally(() => {
          this.running -= 1;
          const left = this.runningOf(organizationId) - 1;
          if (left > 0) this.runningByOrganization.set(organizationId, left);
          else this.runningByOrganization.delete(organizationId);
          this.pump();
        });
    }
  }

  async stats(): Promise<{ waiting: number; active: number }> {
    let waiting = 0;
    for (const queue of this.queues.values()) for (const job of queue) if (!job.settled) waiting++;
    return { waiting, active: this.running };
  }

  async ping(): Promise<void> {
    if (this.closed) throw new Error('job queue is closed');
  }

  /** Stops taking jobs; queued jobs are rejected, running ones finish. */
  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const queue of this.queues.values()) for (const job of queue) job.reject(new Error('job queue closed'));
    this.queues.clear();
    this.turn.length = 0;
    while (this.running > 0) await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function settle(job: PendingJob, action: () => void): void {
  if (job.settled) return;
  job.settled = true;
  action();
}
