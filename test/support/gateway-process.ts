import { spawn, type ChildProcess } from 'node:child_process';
import { sleep } from './fault-servers.js';

const LISTENING = /listening on http:\/\/[\d.]+:(\d+)/;

export interface SpawnedGateway {
  child: ChildProcess;
  /** `http://127.0.0.1:<port>`, the port the gateway reported once listening. */
  base: string;
  /** SIGKILL, resolved once the process has exited. */
  kill(): Promise<void>;
}

/**
 * A gateway process as `npm start` runs it (`node --max-semi-space-size=64 --import tsx gateway/main.ts`), on a
 * port of its choosing, with only the environment given (plus PATH and HOME); resolves once it listens.
 */
export async function spawnGateway(env: Record<string, string>, timeoutMs = 45_000): Promise<SpawnedGateway> {
  let output = '';
  const child = spawn(process.execPath, ['--max-semi-space-size=64', '--import', 'tsx', 'gateway/main.ts'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', HOST: '127.0.0.1', PORT: '0', METRICS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  for (let waited = 0; !LISTENING.test(output); waited += 50) {
    if (child.exitCode !== null || waited > timeoutMs) {
      child.kill('SIGKILL');
      throw new Error(`gateway did not start: ${output}`);
    }
    await sleep(50);
  }
  return {
    child,
    base: `http://127.0.0.1:${LISTENING.exec(output)![1]}`,
    kill: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
  };
}
