import { spawn } from 'node:child_process';

/** A fenced shell block of a Markdown file, and whether it is marked to be run by the docs test (```sh runnable). */
export interface ShellBlock {
  code: string;
  runnable: boolean;
  /** 1-based line of the opening fence, for a failure message. */
  line: number;
}

/** Every ```sh block of a Markdown text, indented ones (inside a list) included, with the indentation removed. */
export function shellBlocks(markdown: string): ShellBlock[] {
  const blocks: ShellBlock[] = [];
  for (const match of markdown.matchAll(/^( *)```sh( runnable)?\n([\s\S]*?)^\1```$/gm)) {
    const indent = match[1]!.length;
    const code = match[3]!
      .split('\n')
      .map((line) => line.slice(Math.min(indent, line.length - line.trimStart().length)))
      .join('\n');
    blocks.push({ code, runnable: match[2] !== undefined, line: markdown.slice(0, match.index).split('\n').length });
  }
  return blocks;
}

export interface BlockRun {
  status: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/**
 * Runs one block with bash as a reader would, in its own process group (killed whole past `timeoutMs`): the
 * variables earlier blocks exported are read from `stateFile` first and written back after, `set -euo pipefail`
 * stops at the first failing command, and curl fails on an HTTP error status (the body still printed), so an
 * example answered 4xx or 5xx fails.
 */
export function runBlock(
  code: string,
  options: { cwd: string; env: Record<string, string>; stateFile: string; timeoutMs: number },
): Promise<BlockRun> {
  const script = [
    'set -euo pipefail',
    `source ${JSON.stringify(options.stateFile)}`,
    'curl() { command curl --fail-with-body --show-error "$@"; }',
    code,
    `export -p > ${JSON.stringify(options.stateFile)}`,
  ].join('\n');
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { cwd: options.cwd, env: options.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => {
      timedOut = true;
      process.kill(-child.pid!, 'SIGKILL');
    }, options.timeoutMs);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr, timedOut });
    });
  });
}
