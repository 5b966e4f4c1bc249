import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { sleep } from './fault-servers.js';
import { RAISED_LIMITS } from './test-environment.js';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
const LISTENING = /listening on http:\/\/[\d.]+:(\d+)/;

/** Every process started here is SIGKILLed when this process exits, so a failing test or bench leaves nothing behind. */
const started = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

export interface SpawnedGateway {
  child: ChildProcess;
  pid: number;
  /** `http://127.0.0.1:<port>`, the port the gateway reported once listening. */
  base: string;
  /** The last few KB the process printed, for a failure message. */
  output(): string;
  /** `kill -9`: nothing drains, nothing flushes, no lease is released. Resolves once the process has exited. */
  kill(): Promise<void>;
  /** SIGTERM (the gateway's graceful stop), then SIGKILL after `graceMs`; resolves once the process has exited. */
  stop(graceMs?: number): Promise<void>;
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((resolve) => child.once('exit', () => resolve()));

/**
 * A gateway process as `npm start` runs it (`node --max-semi-space-size=64 --import tsx gateway/main.ts`, the node
 * process itself, so its pid is the one whose CPU /proc reports), with only the environment given (plus PATH and
 * HOME), on a port of its choosing unless `env` sets PORT; resolves once it listens. Stopped always by pid.
 */
export async function spawnGateway(env: Record<string, string>, timeoutMs = 45_000): Promise<SpawnedGateway> {
  let output = '';
  const child = spawn(process.execPath, ['--max-semi-space-size=64', '--import', 'tsx', 'gateway/main.ts'], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0',
      ...RAISED_LIMITS,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.add(child);
  child.once('exit', () => started.delete(child));
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-8000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  const kill = async () => {
    if (gone()) return;
    const done = exited(child);
    child.kill('SIGKILL');
    await done;
  };
  for (let waited = 0; !LISTENING.test(output); waited += 50) {
    if (gone() || waited > timeoutMs) {
      await kill();
      throw new Error(`gateway did not start: ${output}`);
    }
    await sleep(50);
  }
  return {
    child,
    pid: child.pid!,
    base: `http://127.0.0.1:${LISTENING.exec(output)![1]}`,
    output: () => output,
    kill,
    stop: async (graceMs = 15_000) => {
      if (gone()) return;
      const done = exited(child);
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await done;
      clearTimeout(timer);
    },
  };
}
