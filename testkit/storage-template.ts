import { createHash, randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { EmbeddedStorage } from '../shared/storage/embedded-storage.js';
import { ServerStorage } from '../shared/storage/server-storage.js';
import { scratchRoot } from './scratch-dir.js';

/**
 * Test environments start from a copy of an already migrated database instead of migrating their own: a fresh
 * embedded data directory costs PGlite's initdb plus every migration (about 1.5 s on a quiet 2-core machine, far
 * more under load), a fresh server database every migration (about 1 s), and the suite opens hundreds. The
 * gateway still runs its migrator at every boot; on the copy it finds nothing pending, as after a restart.
 *
 * The template is built by the product's own open (EmbeddedStorage.open / ServerStorage.open on an empty
 * location), once per `migrationsKey()`: any change to a migration, to the code that runs them or to PGlite gives
 * a new key and so a new template. The storage contract (test/unit/storage.contract.test.ts) still migrates
 * empty locations, so the migrations themselves stay tested from scratch on both drivers.
 */

const STORAGE_DIR = fileURLToPath(new URL('../shared/storage/', import.meta.url));

/** What decides the content of a migrated database: the migrations' source, the code that runs them, PGlite. */
export function migrationsKey(): string {
  const hash = createHash('sha256');
  const migrations = readdirSync(join(STORAGE_DIR, 'migrations')).sort();
  for (const file of migrations)
    hash
      .update(`${file}\0`)
      .update(readFileSync(join(STORAGE_DIR, 'migrations', file)))
      .update('\0');
  for (const file of ['storage.ts', 'embedded-storage.ts', 'server-storage.ts', 'single-statement-driver.ts']) {
    hash
      .update(`${file}\0`)
      .update(readFileSync(join(STORAGE_DIR, file)))
      .update('\0');
  }
  hash.update(readFileSync(fileURLToPath(new URL('../node_modules/@electric-sql/pglite/package.json', import.meta.url))));
  return hash.digest('hex').slice(0, 16);
}

let key: string | undefined;
const currentKey = () => (key ??= migrationsKey());

/**
 * The migrated embedded template's directory (it holds `pg/`, as a DATA_DIR does), built on first use. Workers
 * build concurrently without harm: each builds in a private directory and renames it into place; a rename that
 * finds the place taken loses, and uses the winner's. A directory at that place is therefore always complete.
 */
async function embeddedTemplate(): Promise<string> {
  const name = `floorcast-template-${currentKey()}`;
  const dir = join(scratchRoot, name);
  sweepStale(name);
  if (existsSync(dir)) {
    const now = new Date();
    utimesSync(dir, now, now); // in use: see sweepStale
    return dir;
  }
  const building = mkdtempSync(join(scratchRoot, 'floorcast-template-build-'));
  try {
    const storage = await EmbeddedStorage.open(building);
    await storage.close();
    renameSync(building, dir);
  } catch (error) {
    if (!existsSync(dir)) throw error;
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
  return dir;
}

const DAY_MS = 86_400_000;
let swept = false;

/**
 * Once per process: removes the embedded templates of other migration sets not used for a day, and the test,
 * build and fault-server directories that processes which died left behind (under /dev/shm they hold memory until
 * a reboot).
 */
function sweepStale(current: string): void {
  if (swept) return;
  swept = true;
  for (const name of readdirSync(scratchRoot)) {
    if (name === current || !/^floorcast-(template-[0-9a-f]{16}|template-build-.+|test-.+|fault-pg-.+)$/.test(name)) continue;
    try {
      if (Date.now() - statSync(join(scratchRoot, name)).mtimeMs > DAY_MS)
        rmSync(join(scratchRoot, name), { recursive: true, force: true });
    } catch {
      // gone already, or not ours to remove
    }
  }
}

/** Puts a migrated embedded database into `dataDir` (at `<dataDir>/pg`, where EmbeddedStorage opens it). */
export async function copyEmbeddedTemplate(dataDir: string): Promise<void> {
  cpSync(join(await embeddedTemplate(), 'pg'), join(dataDir, 'pg'), { recursive: true });
}

/** Any fixed number, shared by every test process: serialises template builds on one server. */
const TEMPLATE_LOCK = 0x666c7463; // "fltc"

/**
 * The name of the migrated template database on the server at `baseUrl`, built on first use. Builds are
 * serialised by an advisory lock; a build migrates a scratch database and only renames it to the template's
 * name once complete, so a build that dies leaves no half-migrated template. Nothing ever connects to the
 * template afterwards, as `create database ... template` requires.
 */
export async function serverTemplate(baseUrl: string): Promise<string> {
  const name = `floorcast_template_${currentKey()}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  try {
    await admin.query('select pg_advisory_lock($1)', [TEMPLATE_LOCK]);
    const found = await admin.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount === 0) {
      const building = `floorcast_template_build_${randomBytes(4).toString('hex')}`;
      await admin.query(`create database ${building}`);
      try {
        const url = new URL(baseUrl);
        url.pathname = `/${building}`;
        const storage = await ServerStorage.open(url.toString());
        await storage.close();
        await admin.query(`alter database ${building} rename to ${name}`);
      } catch (error) {
        await admin.query(`drop database if exists ${building} with (force)`).catch(() => undefined);
        throw error;
      }
    }
    return name;
  } finally {
    await admin.end();
  }
}
