import { describe, expect, it } from 'vitest';
import { afterCommit } from '../../shared/errors.js';

describe('afterCommit', () => {
  it('logs a failing post-commit step to the logger it is given, with its name, and resolves', async () => {
    const logged: { fields: Record<string, unknown>; message: string }[] = [];
    const logger = { error: (fields: Record<string, unknown>, message: string) => void logged.push({ fields, message }) };
    const failure = new Error('bus away');
    await expect(afterCommit(logger as never, 'group updated', () => Promise.reject(failure))).resolves.toBeUndefined();
    await afterCommit(logger as never, 'group created', () => undefined);
    const message = expect.stringContaining('the write is committed');
    expect(logged).toEqual([{ fields: { err: failure, step: 'group updated' }, message }]);
  });
});
