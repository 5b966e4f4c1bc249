import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';

/**
 * Gateway processes for the multi-gateway bench: `node --max-semi-space-size=64 --import tsx gateway/main.ts` (as `npm start`) (the node process itself,
 * so its pid is the one whose CPU /proc reports), on fixed ports, killed with SIGKILL or stopped with SIGTERM
 * then SIGKILL, always by pid. Every process started here is also SIGKILLed when this process exits, so a
 * failing run leaves nothing behind. (test/fault/gateway-kill.test.ts spawns the same way, inline.)
 */
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
const started = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

export interface GatewayProcess {
  child: ChildProcess;
  pid: number;
  baseUrl: string;
  metricsUrl: string;
  /** The last few KB the process printed, for a failure message. */
  output(): string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts a gateway on `port` (metrics on `metricsPort`) with `env`, and waits until /readyz answers 200. */
export async function startGatewayProcess(env: Record<string, string>, port: number, metricsPort: number, timeoutMs = 60_000): Promise<GatewayProcess> {
  const child = spawn(process.execPath, ['--max-semi-space-size=64', '--import', 'tsx', 'gateway/main.ts'], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env, HOST: '127.0.0.1', PORT: String(port), METRICS_PORT: String(metricsPort) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.add(child);
  child.once('exit', () => started.delete(child));
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const gateway: GatewayProcess = { child, pid: child.pid!, baseUrl: `http://127.0.0.1:${port}`, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`, output: () => output };
  for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`gateway on port ${port} exited while starting: ${output}`);
    if (Date.now() > deadline) {
      await stopGatewayProcess(gateway);
      throw new Error(`gateway on port ${port} not ready within ${timeoutMs} ms: ${output}`);
    }
    const ready = await fetch(`${gateway.baseUrl}/readyz`).then(
      (response) => response.status === 200,
      () => false,
    );
    if (ready) return gateway;
  }
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise<void>((resolve) => child.once('exit', () => resolve()));

/** `kill -9`: nothing drains, nothing flushes, no lease is released. Resolves once the process is gone. */
export async function killGatewayProcess(gateway: GatewayProcess): Promise<void> {
  const gone = exited(gateway.child);
  gateway.child.kill('SIGKILL');
  await gone;
}

/** SIGTERM (the gateway's graceful stop), then SIGKILL after `graceMs`. */
export async function stopGatewayProcess(gateway: GatewayProcess, graceMs = 15_000): Promise<void> {
  const gone = exited(gateway.child);
  gateway.child.kill('SIGTERM');
  const timer = setTimeout(() => gateway.child.kill('SIGKILL'), graceMs);
  await gone;
  clearTimeout(timer);
}

const clockTicks = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

/** User + system CPU seconds of a process so far, from /proc/<pid>/stat (utime and stime, in clock ticks). */
export function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks;
}

/** Whether something accepts connections on 127.0.0.1:`port` (a stray gateway, say). */
export function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

/** Gateway processes running from tsx that this process did not start (`pgrep -af "tsx gateway"`). */
export function strayGateways(): string[] {
  let listing = '';
  try {
    listing = execFileSync('pgrep', ['-af', 'tsx gateway']).toString();
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
  const ours = new Set([...started].map((child) => child.pid));
  return listing
    .split('\n')
    .filter((line) => line.trim() !== '')
    .filter((line) => !ours.has(Number(line.split(' ')[0])));
}
