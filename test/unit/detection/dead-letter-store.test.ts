import { describe, expect, it } from 'vitest';
import { emptyDetections, type DetectedAlarm } from '../../../gateway/detection/detections.js';
import { DetectionOutbox } from '../../../gateway/detection/detection-outbox.js';
import type { DeadLetterStore, KeptDeadLetter, StoredDeadLetter } from '../../../gateway/detection/dead-letter-store.js';
import { createLogger } from '../../../shared/logger.js';

const alarm = (key: string, buildingId = 1): DetectedAlarm => ({
  organizationId: 'org',
  type: 'DEADMAN',
  deviceId: key,
  buildingId,
  idempotencyKey: key,
});

/** A fake table of dead letters; `refuseKeep` stands for a table that refuses even the plain insert. */
function fakeStore() {
  const rows = new Map<string, KeptDeadLetter & { claimed: boolean }>();
  let next = 0;
  let refuseKeep = false;
  const store: DeadLetterStore = {
    keep: async (letter) => {
      if (refuseKeep) throw new TypeError('table refused');
      const id = `row-${++next}`;
      rows.set(id, { ...structuredClone(letter), claimed: true });
      return id;
    },
    refused: async (id, error, failures, retryAt) => void Object.assign(rows.get(id)!, { error: String(error), failures, retryAt }),
    stored: async (id) => void rows.delete(id),
    adopt: async (owns) => {
      const adopted: StoredDeadLetter[] = [];
      for (const [id, row] of rows)
        if (!row.claimed && owns(row.buildingId))
          adopted.push({
            id,
            organizationId: row.organizationId,
            item: structuredClone(row.item),
            failures: row.failures,
            retryAt: row.retryAt,
          }),
            (row.claimed = true);
      return adopted;
    },
    release: async () => {
      for (const row of rows.values()) row.claimed = false;
    },
  };
  return { rows, store, refuseAll: () => (refuseKeep = true) };
}

describe('DetectionOutbox with a dead letter store', () => {
  it('keeps a dead letter in the store, updates it on each refusal and deletes it once stored', async () => {
    let refuse = true;
    const raised: string[] = [];
    const sink = {
      storeZoneEvents: async () => undefined,
      raiseAlarm: async (a: DetectedAlarm) => {
        if (refuse && a.idempotencyKey === 'poison') throw new TypeError('check constraint');
        raised.push(a.idempotencyKey);
      },
      announce: async () => undefined,
    };
    const { rows, store } = fakeStore();
    let now = 1_000_000;
    const outbox = new DetectionOutbox(sink, createLogger('silent'), 100_000, () => now, store);
    outbox.add({ ...emptyDetections(), alarms: [alarm('poison'), alarm('next')] }, true);
    await outbox.drain();
    expect(raised).toEqual(['next']);
    expect([...rows.values()]).toMatchObject([
      {
        organizationId: 'org',
        buildingId: 1,
        item: { alarm: { idempotencyKey: 'poison' } },
        failures: 1,
        error: expect.stringContaining('check constraint'),
      },
    ]);
    now += 5000;
    await outbox.retryDeadLetters(() => true);
    expect([...rows.values()]).toMatchObject([{ failures: 2 }]);
    refuse = false;
    now += 10_000;
    await outbox.retryDeadLetters(() => true);
    expect(raised).toEqual(['next', 'poison']);
    expect(rows.size).toBe(0);
    expect(outbox.deadLetterCount).toBe(0);
  });

  it('retries what another process kept (a restart), for the buildings it owns only, and stores each once', async () => {
    const { rows, store } = fakeStore();
    let refuse = true;
    const raised: string[] = [];
    const sink = {
      storeZoneEvents: async () => undefined,
      raiseAlarm: async (a: DetectedAlarm) => {
        if (refuse) throw new TypeError('check constraint');
        raised.push(a.idempotencyKey);
      },
      announce: async () => undefined,
    };
    const first = new DetectionOutbox(sink, createLogger('silent'), 100_000, Date.now, store);
    first.add({ ...emptyDetections(), alarms: [alarm('mine', 1), alarm('theirs', 2)] }, true);
    await first.drain();
    expect(rows.size).toBe(2);
    await store.release(); // the first process stops

    refuse = false;
    const second = new DetectionOutbox(sink, createLogger('silent'), 100_000, Date.now, store);
    await second.retryDeadLetters((buildingId) => buildingId === 1);
    await second.retryDeadLetters((buildingId) => buildingId === 1);
    expect(raised).toEqual(['mine']);
    expect([...rows.values()].map((row) => row.item)).toMatchObject([{ alarm: { idempotencyKey: 'theirs' } }]);
  });

  it('keeps a dead letter in memory when even the store refuses it, and retries it all the same', async () => {
    const { store, refuseAll } = fakeStore();
    refuseAll();
    let refuse = true;
    const raised: string[] = [];
    const sink = {
      storeZoneEvents: async () => undefined,
      raiseAlarm: async (a: DetectedAlarm) => {
        if (refuse) throw new TypeError('check constraint');
        raised.push(a.idempotencyKey);
      },
      announce: async () => undefined,
    };
    let now = 0;
    const outbox = new DetectionOutbox(sink, createLogger('silent'), 100_000, () => now, store);
    outbox.add({ ...emptyDetections(), alarms: [alarm('poison')] }, true);
    await outbox.drain();
    expect(outbox.deadLetterCount).toBe(1);
    refuse = false;
    now += 5000;
    await outbox.retryDeadLetters(() => true);
    expect(raised).toEqual(['poison']);
    expect(outbox.deadLetterCount).toBe(0);
  });
});
