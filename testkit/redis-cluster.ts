import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { RedisConnections } from '../shared/redis/redis-connections.js';
import { freePort, track, untrack } from './fault-servers.js';
import { scratchRoot } from './scratch-dir.js';

/** Connections to one Redis server at `url`, as REDIS_URL makes them. */
export const redisServer = (url: string) => new RedisConnections({ url });

const hasRedisServer = (() => {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'pipe' });
    execFileSync('redis-cli', ['--version'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
})();
/** Why the Redis Cluster tests are skipped here, or '' when they run. */
export const redisClusterSkipReason = hasRedisServer ? '' : 'Redis Cluster tests skipped: redis-server or redis-cli is not installed';

export interface LocalRedisCluster {
  /** The masters' `host:port`, comma-separated: a REDIS_CLUSTER_NODES value. */
  seeds: string;
  connections: RedisConnections;
  /** The index of the master that serves `key` (a key or a sharded channel). */
  masterOf(key: string): Promise<number>;
  /** SIGKILLs master `index`, then starts it again on its ports and cluster config (its slots, none of its data). */
  restart(index: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A Redis Cluster for the test file that calls this (at its top level): started before its tests, killed after
 * them. Without redis-server, undefined, and the reason printed; otherwise the running cluster's getter.
 */
export function redisClusterOfThisFile(): (() => LocalRedisCluster) | undefined {
  if (redisClusterSkipReason) {
    console.warn(redisClusterSkipReason);
    return undefined;
  }
  let cluster: LocalRedisCluster | undefined;
  beforeAll(async () => void (cluster = await startRedisCluster()));
  afterAll(async () => cluster?.stop());
  return () => cluster!;
}

/**
 * A Redis Cluster of its own for a test file: `masters` redis-server processes on free ports (client and cluster
 * bus ports), joined by `redis-cli --cluster create` with no replicas, and ready once every node says
 * cluster_state:ok. `stop` kills them by pid and removes their directory.
 */
export async function startRedisCluster(masters = 3): Promise<LocalRedisCluster> {
  const dir = mkdtempSync(join(scratchRoot, 'floorcast-redis-cluster-'));
  const children: ChildProcess[] = [];
  const ports: number[] = [];
  const busPorts: number[] = [];
  const kill = async (child: ChildProcess) => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
    untrack(child.pid!);
  };
  const stop = async () => {
    await Promise.all(children.map(kill));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const taken = new Set<number>();
    // Two calls may get the same free port back: each port is used once.
    const unusedPort = async () => {
      let port = await freePort();
      while (taken.has(port)) port = await freePort();
      taken.add(port);
      return port;
    };
    for (let index = 0; index < masters; index++) {
      ports.push(await unusedPort());
      busPorts.push(await unusedPort());
      children.push(await startNode(dir, ports[index]!, busPorts[index]!));
    }
    const nodes = ports.map((port) => `127.0.0.1:${port}`);
    execFileSync('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'], {
      stdio: 'pipe',
      timeout: 30_000,
    });
    await untilClusterOk(ports);
    return {
      seeds: nodes.join(','),
      connections: new RedisConnections({ clusterNodes: ports.map((port) => ({ host: '127.0.0.1', port })) }),
      masterOf: async (key) => {
        const slot = Number(execFileSync('redis-cli', ['-p', String(ports[0]), 'cluster', 'keyslot', key], { stdio: 'pipe' }).toString());
        const owner = ports.findIndex((port) =>
          execFileSync('redis-cli', ['-p', String(port), 'cluster', 'nodes'], { stdio: 'pipe' })
            .toString()
            .split('\n')
            .some((line) => line.includes('myself') && servesSlot(line, slot)),
        );
        if (owner < 0) throw new Error(`no master serves slot ${slot}`);
        return owner;
      },
      restart: async (index) => {
        await kill(children[index]!);
        children[index] = await startNode(dir, ports[index]!, busPorts[index]!);
        await untilClusterOk(ports);
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Whether a `cluster nodes` line's slot ranges (`0-5460`, `7`) hold `slot`. */
function servesSlot(line: string, slot: number): boolean {
  return line
    .split(' ')
    .slice(8)
    .some((range) => {
      const [from, to = from] = range.split('-').map(Number);
      return slot >= from! && slot <= to!;
    });
}

async function startNode(dir: string, port: number, busPort: number): Promise<ChildProcess> {
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-port', String(busPort)];
  args.push('--cluster-config-file', `nodes-${port}.conf`, '--dir', dir, '--save', '', '--appendonly', 'no');
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  track(child.pid!);
  await new Promise<void>((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`redis-server (cluster node) did not start: ${output}`)), 15_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) clearTimeout(timer), resolve();
    });
    child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`redis-server exited with ${code}: ${output}`))));
  });
  return child;
}

/** Every node agrees the cluster is up (all slots served), and a cluster client sees all the masters. */
async function untilClusterOk(ports: number[]): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const states = ports.map((port) => {
      const info = execFileSync('redis-cli', ['-p', String(port), 'cluster', 'info'], { stdio: 'pipe' }).toString();
      return /cluster_state:ok/.test(info);
    });
    if (states.every(Boolean)) break;
    if (Date.now() > deadline) throw new Error('the Redis Cluster did not reach cluster_state:ok');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const probe = new Cluster(ports.map((port) => ({ host: '127.0.0.1', port })));
  try {
    await probe.ping();
    if (probe.nodes('master').length !== ports.length) throw new Error('the cluster client does not see every master');
  } finally {
    probe.disconnect();
  }
}
