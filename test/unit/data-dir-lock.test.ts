import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DataDirInUseError, LOCK_FILE, lockDataDir } from '../../shared/storage/data-dir-lock.js';

/** A pid that is certainly dead: a child that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '0']);
  await new Promise((resolve) => child.once('exit', resolve));
  return child.pid!;
}

describe('DATA_DIR lock', () => {
  const dirs: string[] = [];
  const dataDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'floorcast-lock-'));
    dirs.push(dir);
    return dir;
  };
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('writes the owner pid, refuses a second owner naming the first, and is free again once released', () => {
    const dir = dataDir();
    const lock = lockDataDir(dir, process.pid);
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8').trim()).toBe(String(process.pid));
    // Another live process (our parent) asking for it is refused with the owner's pid.
    const refused = (() => {
      try {
        lockDataDir(dir, process.ppid);
      } catch (error) {
        return error;
      }
    })();
    expect(refused).toBeInstanceOf(DataDirInUseError);
    expect((refused as Error).message).toContain(`DATA_DIR is in use by pid ${process.pid}`);
    lock.release();
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    lockDataDir(dir, process.ppid).release();
  });

  it('takes over the lock of a dead pid, and of an unreadable file', async () => {
    const dir = dataDir();
    writeFileSync(join(dir, LOCK_FILE), `${await deadPid()}\n`);
    const lock = lockDataDir(dir);
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8').trim()).toBe(String(process.pid));
    lock.release();
    writeFileSync(join(dir, LOCK_FILE), '');
    lockDataDir(dir).release();
  });

  it('does not remove a lock that another process took after ours was taken over', () => {
    const dir = dataDir();
    const lock = lockDataDir(dir);
    writeFileSync(join(dir, LOCK_FILE), `${process.ppid}\n`); // as if ours had been taken over
    lock.release();
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8').trim()).toBe(String(process.ppid));
  });

  it('is released when the owning process exits', async () => {
    const dir = dataDir();
    const script = `import { lockDataDir } from './shared/storage/data-dir-lock.ts'; lockDataDir(${JSON.stringify(dir)}); console.log('LOCKED'); setTimeout(() => process.exit(0), 100);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    expect(await new Promise((resolve) => child.once('exit', resolve)), output).toBe(0);
    expect(output).toContain('LOCKED');
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  });
});
