import { describe, expect, it } from 'vitest';
import { ReplayGate } from '../../gateway/ws/replay-gate.js';

const alarm = (seq: number) => ({ op: 'alarm', topic: 'organization/alarms', data: { seq } });
const seqs = (frames: readonly (object | undefined)[]) =>
  frames.filter((frame) => frame !== undefined).map((frame) => (frame as ReturnType<typeof alarm>).data.seq);

/** Replay (from storage) and live pushes meet in the gate: every seq after since_seq once, in order. */
describe('the replay gate', () => {
  it('holds live alarms during the replay, drops those the replay sent, and flushes the rest in seq order', () => {
    const gate = new ReplayGate(10);
    const sent: (object | undefined)[] = [];
    // Pushed live while the replay reads: some the replay will also read, some it will not.
    for (const seq of [13, 11, 15, 14]) sent.push(gate.live(alarm(seq)));
    for (const seq of [11, 12, 13]) sent.push(gate.replayed(alarm(seq)));
    expect(gate.holdsNewer).toBe(true);
    expect(gate.upTo).toBe(13);
    sent.push(...gate.finish());
    expect(seqs(sent)).toEqual([11, 12, 13, 14, 15]);
  });

  it('after the replay, passes new alarms and drops late pushes of replayed ones', () => {
    const gate = new ReplayGate(0);
    gate.replayed(alarm(1));
    gate.replayed(alarm(2));
    expect(gate.finish()).toEqual([]);
    expect(gate.live(alarm(2))).toBeUndefined(); // its push arrived after the replay had read it
    expect(seqs([gate.live(alarm(4)), gate.live(alarm(3))])).toEqual([4, 3]); // live order is the bus's
  });

  it('never replays a seq twice nor at or below since_seq, and lets frames without a seq through', () => {
    const gate = new ReplayGate(5);
    expect(gate.replayed(alarm(5))).toBeUndefined();
    expect(gate.replayed(alarm(6))).toBeDefined();
    expect(gate.replayed(alarm(6))).toBeUndefined();
    expect(gate.live({ op: 'alarm', data: {} })).toEqual({ op: 'alarm', data: {} });
    expect(gate.live(alarm(4))).toBeUndefined();
  });
});
