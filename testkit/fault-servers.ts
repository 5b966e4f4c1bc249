import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { scratchRoot } from './scratch-dir.js';

/**
 * Private PostgreSQL and Redis servers for fault injection: each test file starts its own on a free port, so it
 * may stop, kill and restart them without touching the shared servers other tests use. Cleanup is by pid (never
 * by name) and also runs on process exit, so a failing test leaves nothing running.
 */
const PG_BIN = '/usr/lib/postgresql/15/bin';
const hasPostgresUser = (() => {
  try {
    execFileSync('id', ['-u', 'postgres'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
})();
const hasInitdb = existsSync(join(PG_BIN, 'initdb')) && existsSync(join(PG_BIN, 'pg_ctl'));
/** initdb refuses to run as root, so the servers run as `postgres` through runuser, which needs root. */
export const faultServersAvailable = hasInitdb && hasPostgresUser && process.getuid?.() === 0;
export const faultServersSkipReason = faultServersAvailable
  ? ''
  : `fault suite skipped: ${!hasInitdb ? `${PG_BIN}/initdb not found` : !hasPostgresUser ? 'no postgres user' : 'runuser needs root'}`;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Pids of the servers started here, SIGKILLed when the test process exits (a failing test leaves nothing running). */
const pidsToKill = new Set<number>();
let exitHookInstalled = false;
export function track(pid: number): void {
  pidsToKill.add(pid);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const p of pidsToKill) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

export function untrack(pid: number): void {
  pidsToKill.delete(pid);
}

const asPostgres = (command: string, args: string[]) =>
  execFileSync('runuser', ['-u', 'postgres', '--', command, ...args], { stdio: 'pipe', timeout: 60_000 });

export class FaultPostgres {
  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  private get dataDir(): string {
    return join(this.dir, 'data');
  }

  /** initdb (trust auth, no fsync: durability against the OS is not what these tests are about) and start. */
  static async start(): Promise<FaultPostgres> {
    // In memory where the host allows (scratch-dir.ts): initdb's 40 MB, and removing them, wait for no disk.
    const dir = mkdtempSync(join(scratchRoot, 'floorcast-fault-pg-'));
    chmodSync(dir, 0o700);
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
    const server = new FaultPostgres(dir, await freePort());
    asPostgres(join(PG_BIN, 'initdb'), ['-D', server.dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
    await server.resume();
    return server;
  }

  /** Starts (again) on the same port and data; resolves once it accepts connections. */
  async resume(): Promise<void> {
    asPostgres(join(PG_BIN, 'pg_ctl'), [
      '-D',
      this.dataDir,
      '-l',
      join(this.dir, 'log'),
      '-w',
      '-t',
      '30',
      '-o',
      `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`,
      'start',
    ]);
    const pid = this.pid();
    if (pid) track(pid);
  }

  /** Stops it: `fast` (clients are disconnected) or `immediate` (as a crash would). */
  stop(mode: 'fast' | 'immediate' = 'fast'): void {
    const pid = this.pid();
    asPostgres(join(PG_BIN, 'pg_ctl'), ['-D', this.dataDir, '-m', mode, '-w', '-t', '30', 'stop']);
    if (pid) pidsToKill.delete(pid);
  }

  pid(): number | undefined {
    const file = join(this.dataDir, 'postmaster.pid');
    if (!existsSync(file)) return undefined;
    return Number(readFileSync(file, 'utf8').split('\n')[0]);
  }

  async query<T extends pg.QueryResultRow = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
    const client = new pg.Client({ connectionString: this.url });
    await client.connect();
    try {
      return (await client.query<T>(sql, params)).rows;
    } finally {
      await client.end();
    }
  }

  /** Stops the server if running and removes its directory. */
  async destroy(): Promise<void> {
    const pid = this.pid();
    if (pid) {
      try {
        this.stop('immediate');
      } catch {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      pidsToKill.delete(pid);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export class FaultRedis {
  private child?: ChildProcess;

  private constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async start(): Promise<FaultRedis> {
    const server = new FaultRedis(await freePort());
    await server.resume();
    return server;
  }

  async resume(): Promise<void> {
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    track(child.pid!);
    await new Promise<void>((resolve, reject) => {
      let output = '';
      const timer = setTimeout(() => reject(new Error(`redis-server did not start: ${output}`)), 15_000);
      child.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Ready to accept connections')) clearTimeout(timer), resolve();
      });
      child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`redis-server exited with ${code}: ${output}`))));
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    // Killed already (exitCode stays null after a signal): 'exit' will not come again.
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    pidsToKill.delete(child.pid!);
  }

  destroy(): Promise<void> {
    return this.stop();
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A small deterministic generator, so a failing fault run can be replayed. */
export function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => (state = (state * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}
