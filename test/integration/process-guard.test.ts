import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/**
 * The guard in a real process (the unit test covers its decisions with a fake one): an unhandled rejection
 * is logged and survived; an uncaught exception flushes, then exits with 70 for a supervisor to restart.
 */
const script = `
import { createLogger } from './shared/logger.ts';
import { ProcessGuard } from './shared/process-guard.ts';
const guard = ProcessGuard.install({ logger: createLogger('info'), flushTimeoutMs: 5000 });
guard.flushWith(async () => console.log('FLUSHED'));
Promise.reject(new Error('nobody awaits me'));
setTimeout(() => {
  console.log('ALIVE after ' + guard.counts.unhandledRejection + ' rejection');
  setTimeout(() => { throw new Error('state may be corrupt'); });
});
`;

describe('the process guard in a real process', () => {
  it('survives an unhandled rejection and exits 70 after flushing on an uncaught exception', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: process.cwd(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code, output).toBe(70);
    expect(output).toContain('ALIVE after 1 rejection');
    expect(output).toContain('unhandledRejection: survived');
    expect(output).toContain('nobody awaits me');
    expect(output).toContain('state may be corrupt');
    expect(output).toContain('uncaughtException: exiting with 70');
    expect(output).toContain('FLUSHED'); // (pino and console.log are not ordered with each other)
  });
});
