import { readFileSync } from 'node:fs';
import { configSchema } from '../shared/config.js';

/** Where the generated table sits in docs/configuration.md: everything between these two lines is generated. */
export const CONFIG_TABLE_START = '<!-- generated from shared/config.ts by testkit/config-reference.ts: do not edit by hand -->';
export const CONFIG_TABLE_END = '<!-- end of generated table -->';

/**
 * Each setting's one-line doc comment, read from the source of `configSchema` (zod keeps no comments): the
 * `/** ... *\/` line right above `NAME:`. A setting without one is missing from the answer.
 */
export function configDocComments(source = readFileSync(new URL('../shared/config.ts', import.meta.url), 'utf8')): Map<string, string> {
  const schemaSource = source.slice(source.indexOf('export const configSchema'));
  const comments = new Map<string, string>();
  for (const match of schemaSource.matchAll(/^ {2}\/\*\*\s*(.+?)\s*\*\/\n {2}([A-Z][A-Z0-9_]*):/gm)) comments.set(match[2]!, match[1]!);
  return comments;
}

/** A setting's default as a reader sets it in the environment; `unset` when it has none. */
function defaultOf(name: string): string {
  const shape = configSchema.shape as Record<string, { safeParse(value: unknown): { success: boolean; data?: unknown } }>;
  const parsed = shape[name]!.safeParse(undefined);
  const value = parsed.success ? parsed.data : undefined;
  if (value === undefined) return 'unset';
  if (value === '' || (Array.isArray(value) && value.length === 0)) return 'empty';
  return `\`${Array.isArray(value) ? value.join(',') : String(value)}\``;
}

/** The configuration table: one row per setting of `configSchema`, in its order, with default and doc comment. */
export function configurationTable(): string {
  const comments = configDocComments();
  const rows = Object.keys(configSchema.shape).map((name) => {
    const comment = (comments.get(name) ?? '').replaceAll('|', '\\|');
    return `| \`${name}\` | ${defaultOf(name)} | ${comment} |`;
  });
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
}
