import { describe, expect, it } from 'vitest';
import { StorageWatch } from '../../../gateway/detection/storage-watch.js';
import { StorageUnavailableError } from '../../../shared/errors.js';
import { createLogger } from '../../../shared/logger.js';

describe('StorageWatch', () => {
  it('interrupts detection once on an outage and resumes it once, at the moment storage answers again', async () => {
    const told: string[] = [];
    let answer: () => Promise<void> = async () => undefined;
    let now = 1000;
    const watch = new StorageWatch(
      () => answer(),
      { interrupt: () => told.push('interrupt'), resumeAll: (at) => told.push(`resume ${at}`) },
      createLogger('silent'),
      () => now,
    );
    await watch.probe();
    expect(told).toEqual([]);
    answer = async () => {
      throw new StorageUnavailableError();
    };
    await watch.probe();
    await watch.probe();
    expect(told).toEqual(['interrupt']);
    answer = async () => undefined;
    now = 5000;
    await watch.probe();
    await watch.probe();
    expect(told).toEqual(['interrupt', 'resume 5000']);
  });

  it('does not take an error that is no outage for one', async () => {
    const told: string[] = [];
    const watch = new StorageWatch(
      async () => {
        throw new Error('bug');
      },
      { interrupt: () => told.push('interrupt'), resumeAll: () => told.push('resume') },
      createLogger('silent'),
    );
    await watch.probe();
    expect(told).toEqual([]);
  });
});
