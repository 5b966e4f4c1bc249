import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBlock, shellBlocks } from '../../testkit/doc-blocks.js';
import { createTestEnvironment, driverLabel, type TestEnvironment } from '../../testkit/test-environment.js';

/**
 * README and docs/getting-started.md run as written: `npm run demo` is started as a reader starts it (its own
 * PORT and DATA_DIR; the database and Redis of this run's drivers), BASE and PASSWORD are set as README tells
 * the reader to set them (the password read from the demo's summary), and then every ```sh runnable block is
 * run by bash, in order, each file in a fresh shell state. The simulator command the demo prints is run as
 * printed, from the repository, for a few seconds.
 */
const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BLOCK_TIMEOUT_MS = 90_000;
const read = (path: string) => readFileSync(join(REPO_ROOT, path), 'utf8');

/** Waits until `done`, failing early if `child` exits. */
async function waitFor(done: () => boolean, child: ChildProcess, timeoutMs: number, failure: () => string): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !done(); await new Promise((resolve) => setTimeout(resolve, 100))) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(failure());
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('the runnable blocks', () => {
  it.each(['README.md', 'docs/getting-started.md'])('of %s: every example that uses $BASE is marked runnable', (file) => {
    const blocks = shellBlocks(read(file));
    expect(blocks.filter((block) => block.runnable).length).toBeGreaterThanOrEqual(5);
    const untested = blocks.filter((block) => !block.runnable && /\$BASE\b/.test(block.code));
    expect(untested.map((block) => `${file}:${block.line}`)).toEqual([]);
  });
});

describe(`README and docs/getting-started.md against npm run demo (${driverLabel})`, () => {
  let environment: TestEnvironment;
  let demo: ChildProcess;
  let worker: ChildProcess | undefined;
  let output = '';
  let env: Record<string, string>;
  let base: string;
  let password: string;
  const scratch = mkdtempSync(join(tmpdir(), 'floorcast-docs-'));

  beforeAll(async () => {
    // README's e-mail is the default one, and the password is the one the demo generates and prints.
    environment = await createTestEnvironment({
      ADMIN_EMAIL: 'admin@floorcast.local',
      ADMIN_PASSWORD: '',
      LOG_LEVEL: 'info',
      PORT: String(await freePort()),
    });
    env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...environment.env };
    demo = spawn(process.execPath, ['--import', 'tsx', 'demo/main.ts'], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    demo.stdout!.on('data', (chunk) => (output += chunk));
    demo.stderr!.on('data', (chunk) => (output += chunk));
    await waitFor(
      () => /Alarms to expect/.test(output),
      demo,
      150_000,
      () => `the demo did not start:\n${output}`,
    );
    base = /Console: +(http:\/\/[\d.]+:\d+)\/console/.exec(output)![1]!;
    if (environment.env.REDIS_URL) {
      // With Redis, reports run on workers, as on a deployment (docs/operations/postgres-redis.md): start one.
      let printed = '';
      worker = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts'], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      worker.stdout!.on('data', (chunk) => (printed += chunk));
      worker.stderr!.on('data', (chunk) => (printed += chunk));
      await waitFor(
        () => /worker ready/.test(printed),
        worker,
        120_000,
        () => `the worker did not start:\n${printed}`,
      );
    }
    password = /Password: +(\S+) \(generated on this first start/.exec(output)![1]!;
  }, 180_000);

  afterAll(async () => {
    for (const child of [worker, demo]) {
      if (!child || child.exitCode !== null) continue;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 20_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    await environment?.cleanup();
    rmSync(scratch, { recursive: true, force: true });
  }, 60_000);

  it('prints the venue README names: building 1, and a summary the request logs do not bury', async () => {
    expect(output).toMatch(/Floorcast demo: building 1 seeded/);
    expect(output).toContain('E-mail:    admin@floorcast.local');
    // A few seconds of the simulator's uploads later, no request line has been printed at info.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(output).not.toMatch(/"msg":"request"/);
  });

  /** Runs a file's runnable blocks in order, each file from a fresh state holding only BASE and PASSWORD. */
  async function runFile(file: string): Promise<string[]> {
    const stateFile = join(scratch, `${file.replaceAll('/', '-')}.state`);
    writeFileSync(stateFile, `export BASE=${base}\nexport PASSWORD='${password}'\n`);
    const outputs: string[] = [];
    for (const block of shellBlocks(read(file)).filter((candidate) => candidate.runnable)) {
      // npm and npx commands run in the repository, as README says; the others where their files may land.
      const cwd = /\bnp[mx] /.test(block.code) ? REPO_ROOT : scratch;
      const run = await runBlock(block.code, { cwd, env, stateFile, timeoutMs: BLOCK_TIMEOUT_MS });
      const timedOut = run.timedOut ? ` (timed out after ${BLOCK_TIMEOUT_MS} ms)` : '';
      const where = `${file}:${block.line}${timedOut}\n${block.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
      expect(run.status, where).toBe(0);
      outputs.push(run.stdout);
    }
    return outputs;
  }

  it('runs every runnable block of docs/getting-started.md', async () => {
    const outputs = await runFile('docs/getting-started.md');
    expect(outputs.join('\n')).toMatch(/1 Ground floor\n2 First floor/);
    expect(outputs.join('\n')).toContain('ASSISTANCE_REQUEST CONFIRMED critical');
  }, 600_000);

  it('runs every runnable block of README.md, the password reset last', async () => {
    const outputs = await runFile('README.md');
    const all = outputs.join('\n');
    expect(all).toContain('"op":"authenticated"');
    expect(all).toMatch(/"op":"position","topic":"buildings\/1\/positions"/);
    expect(all).toMatch(/Take the lift up to First floor/);
    // The troubleshooting block reset the administrator's password while the demo ran: the new one signs in,
    // the demo's first one no longer does.
    const reset = /password: (\S+)/.exec(outputs.at(-1)!)?.[1];
    expect(reset, outputs.at(-1)).toBeDefined();
    const signIn = (secret: string) => {
      const authorization = `Basic ${Buffer.from(`admin@floorcast.local:${secret}`).toString('base64')}`;
      return fetch(`${base}/api/v1/auth/access_tokens`, { method: 'POST', headers: { authorization } });
    };
    expect((await signIn(reset!)).status).toBe(200);
    expect((await signIn(password)).status).toBe(401);
  }, 600_000);

  it('runs the simulator command the demo prints, as printed, from the repository', async () => {
    const command = /Simulator: (npx tsx demo\/simulator\.ts .+?) {3}\(key/.exec(output)?.[1];
    expect(command, output).toBeDefined();
    const simulator = spawn('bash', ['-c', command!], { cwd: REPO_ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let printed = '';
    simulator.stdout!.on('data', (chunk) => (printed += chunk));
    simulator.stderr!.on('data', (chunk) => (printed += chunk));
    try {
      const started = () => /simulating 50 devices in building 1/.test(printed);
      await waitFor(started, simulator, 60_000, () => `the simulator did not start:\n${printed}`);
      await new Promise((resolve) => setTimeout(resolve, 5000)); // five rounds of uploads at 1 Hz
      expect(simulator.exitCode, printed).toBeNull();
      expect(printed).not.toMatch(/upload failed|simulator failed/);
    } finally {
      if (simulator.exitCode === null) process.kill(-simulator.pid!, 'SIGKILL');
    }
  }, 120_000);
});
