/** The seq of an alarm frame (`{ op, topic, data: { seq } }`), if it has one. */
export const seqOf = (frame: object): number | undefined => {
  const seq = (frame as { data?: { seq?: unknown } }).data?.seq;
  return typeof seq === 'number' ? seq : undefined;
};

/**
 * One subscription resumed with `since_seq`: makes the replay from storage and the live pushes meet so that
 * every alarm event after `since_seq` is delivered exactly once, in seq order.
 *
 * It rests on one property of the alarm store: an organization's seq is taken under a row lock held until
 * commit, so commit order is seq order and any read of `alarm_events` sees a prefix of the seqs. Hence:
 * - while the replay runs, live frames are held by seq (they may be in the replay too, or come after it);
 * - a live frame whose seq is at or below the last replayed seq was committed before that read: a duplicate,
 *   now or whenever its push arrives, even after the replay ended;
 * - when the replay ends, the held frames past it go out in seq order, and the subscription is live.
 */
export class ReplayGate {
  private replaying = true;
  private readonly held = new Map<number, object>();

  constructor(private replayedUpTo: number) {}

  /** The last seq the replay sent (or `since_seq`): where a catch-up read resumes. */
  get upTo(): number {
    return this.replayedUpTo;
  }

  /** Whether live frames past the replay were held (a catch-up read then makes them contiguous). */
  get holdsNewer(): boolean {
    for (const seq of this.held.keys()) if (seq > this.replayedUpTo) return true;
    return false;
  }

  /** A frame read from storage: returned when it is to be sent, undefined when it was already. */
  replayed<T extends object>(frame: T): T | undefined {
    const seq = seqOf(frame);
    if (seq === undefined) return frame;
    if (seq <= this.replayedUpTo) return undefined;
    this.replayedUpTo = seq;
    return frame;
  }

  /** A live frame: returned when it is to be sent now; held during the replay; dropped when replayed. */
  live<T extends object>(frame: T): T | undefined {
    const seq = seqOf(frame);
    if (seq === undefined) return frame;
    if (seq <= this.replayedUpTo) return undefined;
    if (!this.replaying) return frame;
    this.held.set(seq, frame);
    return undefined;
  }

  /** Ends the replay: the held frames it did not cover, in seq order. Later live frames go straight out. */
  finish(): object[] {
    this.replaying = false;
    const pending = [...this.held].filter(([seq]) => seq > this.replayedUpTo).sort(([a], [b]) => a - b);
    this.held.clear();
    return pending.map(([, frame]) => frame);
  }
}
