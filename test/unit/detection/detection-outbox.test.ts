import { describe, expect, it } from 'vitest';
import { emptyDetections } from '../../../gateway/detection/detection-engine.js';
import { DetectionOutbox, type OutboxAlarm } from '../../../gateway/detection/detection-outbox.js';
import { StorageUnavailableError } from '../../../shared/errors.js';
import { createLogger } from '../../../shared/logger.js';

const alarm = (key: string): OutboxAlarm => ({ organizationId: 'org', type: 'DEADMAN', deviceId: 'd', idempotencyKey: key });

function sink(fail: (key: string) => Error | undefined) {
  const raised: string[] = [];
  const announced: number[] = [];
  return {
    raised,
    announced,
    sink: {
      storeZoneEvents: async () => undefined,
      // As the alarm service does: in order, each key stored at most once, so a retried list skips what was stored.
      raiseAlarms: async (alarms: readonly OutboxAlarm[]) => {
        for (const a of alarms) {
          if (raised.includes(a.idempotencyKey)) continue;
          const error = fail(a.idempotencyKey);
          if (error) throw error;
          raised.push(a.idempotencyKey);
        }
      },
      announce: async () => void announced.push(1),
    },
  };
}

describe('DetectionOutbox', () => {
  it('keeps order and retries from where it stopped during an outage', async () => {
    let down = true;
    const { raised, sink: s } = sink((key) => (down && key === 'b' ? new StorageUnavailableError() : undefined));
    const outbox = new DetectionOutbox(s, createLogger('silent'));
    outbox.add(emptyDetections(), true, [alarm('a'), alarm('b')]);
    outbox.add(emptyDetections(), true, [alarm('c')]);
    await outbox.drain();
    expect(raised).toEqual(['a']);
    expect(outbox.size).toBe(2);
    await outbox.drain(); // still down: nothing is skipped
    expect(raised).toEqual(['a']);
    down = false;
    await outbox.drain();
    expect(raised).toEqual(['a', 'b', 'c']);
    expect(outbox.size).toBe(0);
  });

  it('drops an entry that keeps failing for a reason other than an outage, so it cannot block the rest', async () => {
    const { raised, sink: s } = sink((key) => (key === 'poison' ? new TypeError('bug') : undefined));
    const outbox = new DetectionOutbox(s, createLogger('silent'));
    outbox.add(emptyDetections(), true, [alarm('poison')]);
    outbox.add(emptyDetections(), true, [alarm('next')]);
    for (let attempt = 0; attempt < 5; attempt++) await outbox.drain();
    expect(raised).toEqual(['next']);
    expect(outbox.droppedEntries).toBe(1);
  });

  it('is bounded: past its cap the oldest entry is dropped and counted', () => {
    const { sink: s } = sink(() => new StorageUnavailableError());
    const outbox = new DetectionOutbox(s, createLogger('silent'), 2);
    for (const key of ['a', 'b', 'c']) outbox.add(emptyDetections(), true, [alarm(key)]);
    expect(outbox.size).toBe(2);
    expect(outbox.droppedEntries).toBe(1);
  });
});
