import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Builds the control-room console (console/src, bundled by esbuild) into console/dist:
 * `index.html` plus content-hashed assets under `assets/`, and `manifest.json`, which records the hash of
 * every source file that went into the bundle so the gateway can tell a stale build from a fresh one.
 */

export const CONSOLE_ROOT = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = resolve(CONSOLE_ROOT, '..');
export const SOURCE_DIR = join(CONSOLE_ROOT, 'src');
export const DIST_DIR = join(CONSOLE_ROOT, 'dist');
const TEMPLATE = join(SOURCE_DIR, 'index.html');
const ICON = join(SOURCE_DIR, 'favicon.svg');
/** Files that shape the output without being bundle inputs. */
const EXTRA_INPUTS = [TEMPLATE, ICON, fileURLToPath(import.meta.url)];

export interface ConsoleFile {
  /** Path under /console: `index.html` or `assets/<name>-<hash>.<ext>`. */
  path: string;
  body: Buffer;
}

export interface ConsoleManifest {
  /** sha256 over every input file (path and content): equal means the build is current. */
  sourceHash: string;
  /** Inputs relative to the repository root. */
  inputs: string[];
  files: string[];
  builtAt: string;
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

/** The hash of the given inputs as they are on disk now; null when one is missing (sources changed shape). */
export function hashInputs(inputs: readonly string[]): string | null {
  const hash = createHash('sha256');
  for (const input of [...inputs].sort()) {
    const path = join(REPO_ROOT, input);
    if (!existsSync(path)) return null;
    hash.update(input).update('\0').update(readFileSync(path)).update('\0');
  }
  return hash.digest('hex');
}

export function readManifest(dir = DIST_DIR): ConsoleManifest | null {
  try {
    return JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as ConsoleManifest;
  } catch {
    return null;
  }
}

/** True when `dir` holds a build of exactly the current sources (or when there are no sources to compare with). */
export function isCurrent(dir = DIST_DIR): boolean {
  const manifest = readManifest(dir);
  if (!manifest) return false;
  if (!existsSync(SOURCE_DIR)) return true; // a deployment that ships only dist/
  return hashInputs(manifest.inputs) === manifest.sourceHash;
}

/** Loads a build from disk (throws when a listed file is missing, e.g. during a concurrent rebuild). */
export function loadBuild(dir = DIST_DIR): { manifest: ConsoleManifest; files: ConsoleFile[] } {
  const manifest = readManifest(dir);
  if (!manifest) throw new Error(`no console build in ${dir}`);
  return { manifest, files: manifest.files.map((path) => ({ path, body: readFileSync(join(dir, path)) })) };
}

/** Writes a file whole or not at all, so a concurrent reader never sees half of it. */
function writeAtomically(path: string, body: Buffer | string): void {
  mkdirSync(dirname(path), { recursive: true });
  const temporary = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  writeFileSync(temporary, body);
  renameSync(temporary, path);
}

/**
 * Bundles and minifies the console and writes it to `outDir`. Hashed asset names never collide between
 * builds of different sources, so two processes building at once write identical files; `index.html` and
 * the manifest go last, and assets of earlier builds are removed afterwards.
 */
export async function buildConsole(outDir = DIST_DIR): Promise<{ manifest: ConsoleManifest; files: ConsoleFile[] }> {
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    absWorkingDir: REPO_ROOT,
    entryPoints: [join(SOURCE_DIR, 'main.ts')],
    bundle: true,
    minify: true,
    format: 'esm',
    target: ['chrome110', 'firefox110', 'safari16'],
    platform: 'browser',
    outdir: join(outDir, 'assets'),
    entryNames: 'console-[hash]',
    assetNames: '[name]-[hash]',
    sourcemap: 'linked',
    legalComments: 'none',
    metafile: true,
    write: false,
    logLevel: 'silent',
  });
  const assets: ConsoleFile[] = result.outputFiles.map((file) => ({
    path: relative(outDir, file.path).split('\\').join('/'),
    body: Buffer.from(file.contents),
  }));
  const script = assets.find((file) => file.path.endsWith('.js'));
  const style = assets.find((file) => file.path.endsWith('.css'));
  if (!script || !style) throw new Error('the console bundle has no script or no stylesheet');
  const iconBody = readFileSync(ICON);
  const icon: ConsoleFile = { path: `assets/favicon-${sha256(iconBody).slice(0, 10)}.svg`, body: iconBody };
  assets.push(icon);
  const html = readFileSync(TEMPLATE, 'utf8')
    .replace('<!-- icon -->', `<link rel="icon" type="image/svg+xml" href="/console/${icon.path}">`)
    .replace('<!-- stylesheet -->', `<link rel="stylesheet" href="/console/${style.path}">`)
    .replace('<!-- script -->', `<script type="module" src="/console/${script.path}"></script>`);
  const files = [...assets, { path: 'index.html', body: Buffer.from(html) }];

  const inputs = [
    ...Object.keys(result.metafile.inputs).map((input) => relative(REPO_ROOT, resolve(REPO_ROOT, input))),
    ...EXTRA_INPUTS.map((input) => relative(REPO_ROOT, input)),
  ]
    .map((input) => input.split('\\').join('/'))
    .filter((input, index, all) => all.indexOf(input) === index);
  const manifest: ConsoleManifest = {
    sourceHash: hashInputs(inputs) ?? sha256(randomBytes(16)),
    inputs,
    files: files.map((file) => file.path),
    builtAt: new Date().toISOString(),
  };

  for (const file of assets) writeAtomically(join(outDir, file.path), file.body);
  writeAtomically(join(outDir, 'index.html'), html);
  writeAtomically(join(outDir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  const keep = new Set(manifest.files.map((path) => path.replace(/^assets\//, '')));
  for (const name of readdirSync(join(outDir, 'assets'))) {
    if (!keep.has(name) && !name.includes('.tmp-')) rmSync(join(outDir, 'assets', name), { force: true });
  }
  return { manifest, files };
}

/** The current build: loaded from `dir` when it is up to date, otherwise built (the gateway calls this at boot). */
export async function ensureConsoleBuilt(dir = DIST_DIR): Promise<{ manifest: ConsoleManifest; files: ConsoleFile[]; built: boolean }> {
  if (isCurrent(dir)) {
    try {
      return { ...loadBuild(dir), built: false };
    } catch {
      // A concurrent build replaced the files under us: build our own copy.
    }
  }
  if (!existsSync(SOURCE_DIR)) throw new Error(`no console build in ${dir} and no sources in ${SOURCE_DIR}`);
  return { ...(await buildConsole(dir)), built: true };
}

// `npm run build`
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = performance.now();
  buildConsole().then(
    ({ files }) => {
      const total = files.reduce((sum, file) => sum + file.body.length, 0);
      process.stdout.write(
        `console built into ${relative(process.cwd(), DIST_DIR) || DIST_DIR}: ${files.map((f) => f.path).join(', ')} (${(total / 1024).toFixed(1)} KiB, ${Math.round(performance.now() - started)} ms)\n`,
      );
    },
    (error: unknown) => {
      process.stderr.write(`console build failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
