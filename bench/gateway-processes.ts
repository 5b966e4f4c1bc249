import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { spawnGateway, type SpawnedGateway } from '../testkit/gateway-process.js';

/**
 * Gateway processes for the multi-gateway bench, spawned as the fault tests spawn them
 * (testkit/gateway-process.ts), on fixed ports so the bench can check first that no stray gateway holds them
 * (a stray gateway on one of them would stop a start with "PORT N is in use", or with REUSE_PORT=true take part of the load).
 */
export interface GatewayProcess extends SpawnedGateway {
  baseUrl: string;
  metricsUrl: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts a gateway on `port` (metrics on `metricsPort`) with `env`, and waits until /readyz finds its storage and
 * bus ready (the bench runs no job worker, so `jobs` stays not ready on Redis).
 */
export async function startGatewayProcess(
  env: Record<string, string>,
  port: number,
  metricsPort: number,
  timeoutMs = 60_000,
): Promise<GatewayProcess> {
  const spawned = await spawnGateway({ ...env, PORT: String(port), METRICS_PORT: String(metricsPort) }, timeoutMs);
  const gateway: GatewayProcess = { ...spawned, baseUrl: spawned.base, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics` };
  for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
    if (Date.now() > deadline || gateway.child.exitCode !== null) {
      await gateway.stop();
      throw new Error(`gateway on port ${port} not ready within ${timeoutMs} ms: ${gateway.output()}`);
    }
    const ready = await fetch(`${gateway.baseUrl}/readyz`).then(
      async (response) => {
        const { checks } = (await response.json()) as { checks: Record<string, string> };
        return checks.storage === 'ok' && checks.bus === 'ok';
      },
      () => false,
    );
    if (ready) return gateway;
  }
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

/** Gateway processes running from tsx (`pgrep -af "tsx gateway"`): called before this bench starts any, every one is a stray. */
export function strayGateways(): string[] {
  let listing = '';
  try {
    listing = execFileSync('pgrep', ['-af', 'tsx gateway']).toString();
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
  return listing.split('\n').filter((line) => line.trim() !== '');
}
