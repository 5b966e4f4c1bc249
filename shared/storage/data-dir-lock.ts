import { linkSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config.js';

/** The lock file under DATA_DIR: the pid of the one process that has the embedded database open. */
export const LOCK_FILE = 'floorcast.lock';

/** A second process found the lock held by a live one. */
export class DataDirInUseError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`DATA_DIR is in use by pid ${pid} (${dataDir}): embedded PostgreSQL has one writer; stop that process first`);
    this.name = 'DataDirInUseError';
  }
}

export interface DataDirLock {
  readonly path: string;
  /** Removes the lock file if it is still ours; also done on process exit. */
  release(): void;
}

/**
 * Takes DATA_DIR for this process: `npm start`, `npm run demo` and the admin CLI open the embedded database
 * (PGlite), which has no multi-process safety of its own: two processes on one directory each keep their own
 * view and the last to write wins, losing the other's data. The lock file holds the owner's pid; a lock whose
 * pid is dead (a crash, `kill -9`) is taken over. The file is created whole by hard-linking a file already
 * written, so nobody ever reads it half-written, and a takeover goes through a rename only one process wins.
 */
export function lockDataDir(dataDir: string, pid = process.pid): DataDirLock {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 5; attempt++) {
    if (tryCreate(path, pid)) return held(path, pid);
    const owner = readOwner(path);
    if (owner === undefined) continue; // removed (released, or taken over) since: try again
    if (owner !== pid && isAlive(owner)) throw new DataDirInUseError(dataDir, owner);
    // Dead owner (or our own pid left by a previous life of this container): move it aside, then create ours.
    // Of several processes doing this at once, one rename wins; the others find the new lock and look again.
    const aside = `${path}.stale-${pid}`;
    try {
      renameSync(path, aside);
    } catch {
      continue;
    }
    const moved = readOwner(aside);
    if (moved !== owner && moved !== undefined && moved !== pid && isAlive(moved)) {
      // A live process took the lock between our read and our rename: give it back.
      try {
        linkSync(aside, path);
      } catch {
        // somebody else holds it now; the loop looks again
      }
    }
    rmQuiet(aside);
  }
  const owner = readOwner(path);
  throw new DataDirInUseError(dataDir, owner ?? -1);
}

function tryCreate(path: string, pid: number): boolean {
  const draft = `${path}.${pid}.${Date.now()}`;
  writeFileSync(draft, `${pid}\n`, { mode: 0o644 });
  try {
    linkSync(draft, path); // fails with EEXIST if any lock file is there: atomic, and never half-written
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    rmQuiet(draft);
  }
}

function held(path: string, pid: number): DataDirLock {
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    process.off('exit', release);
    if (readOwner(path) === pid) rmQuiet(path);
  };
  process.on('exit', release);
  return { path, release };
}

/** The pid in the lock file; undefined when there is none. An unreadable file counts as a dead owner (0). */
function readOwner(path: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : 0;
}

function isAlive(pid: number): boolean {
  if (pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'; // alive, owned by another user
  }
}

function rmQuiet(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

/**
 * The entry points' lock (`npm start`, `npm run demo`, the admin CLI): on embedded storage only (a server has
 * its own concurrency control). A DATA_DIR held by a live process prints why and exits 1.
 */
export function lockDataDirOrExit(config: Pick<Config, 'DATABASE_URL' | 'DATA_DIR'>, hint = ''): DataDirLock | undefined {
  if (config.DATABASE_URL) return undefined;
  try {
    return lockDataDir(config.DATA_DIR);
  } catch (error) {
    if (!(error instanceof DataDirInUseError)) throw error;
    process.stderr.write(`${error.message}${hint ? `\n${hint}` : ''}\n`);
    process.exit(1);
  }
}
