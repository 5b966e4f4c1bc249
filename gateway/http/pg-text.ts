import { ValidationError, type FieldError } from '../../shared/errors.js';

/**
 * What PostgreSQL refuses in text (and in json/jsonb): the NUL character, and UTF-16 halves that are not a
 * pair (JSON may spell them `"\ud800"`; jsonb refuses the escape, text would store garbage). Refused at the
 * HTTP boundary, once for every route, so no such string reaches a query and fails there as a 500.
 */
export function pgTextProblem(value: string): string | undefined {
  if (value.includes('\u0000')) return 'must not contain the NUL character (\\u0000)';
  if (!(value as unknown as WellFormed).isWellFormed()) return 'must not contain an unpaired UTF-16 surrogate';
  return undefined;
}

/** Node 20 has String.prototype.isWellFormed (ES2024); the ES2022 lib this project compiles against does not name it. */
interface WellFormed {
  isWellFormed(): boolean;
}

/** A key echoed back in an error must not carry what it is refused for. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is exactly what this replaces
const printable = (key: string) => key.replace(/[\u0000\ud800-\udfff]/g, '\ufffd');

/** Whether a JSON text may hold such a string: only an escape can put one there (raw UTF-8 cannot encode either). */
export function mayHoldRefusedText(json: string): boolean {
  return json.includes('\\u0000') || /\\u[dD][89a-fA-F]/.test(json);
}

/** One step down a JSON value: paths are rebuilt from these links only for a finding, so depth costs no copies. */
interface Step {
  value: unknown;
  key: string | undefined;
  parent: Step | undefined;
}

const pathOf = (step: Step, last?: string): string => {
  const parts: string[] = last === undefined ? [] : [last];
  for (let at: Step | undefined = step; at; at = at.parent) if (at.key !== undefined) parts.push(at.key);
  return parts.reverse().join('.');
};

/**
 * Every string (and key) of a parsed JSON value that PostgreSQL would refuse, by path (`poses.3.device_id`).
 * Iterative and linear in the value's size, so a deeply nested body neither overflows the stack nor costs
 * quadratic time; stops after `limit` findings.
 */
export function refusedTextIn(value: unknown, prefix: string | undefined, limit = 20): FieldError[] {
  const found: FieldError[] = [];
  const stack: Step[] = [{ value, key: prefix, parent: undefined }];
  while (stack.length > 0 && found.length < limit) {
    const step = stack.pop()!;
    const current = step.value;
    if (typeof current === 'string') {
      const problem = pgTextProblem(current);
      if (problem) found.push({ field: pathOf(step) || 'body', message: problem });
    } else if (Array.isArray(current)) {
      for (let index = current.length - 1; index >= 0; index--) stack.push({ value: current[index], key: String(index), parent: step });
    } else if (current !== null && typeof current === 'object') {
      const keys = Object.keys(current);
      for (let index = keys.length - 1; index >= 0; index--) {
        const key = keys[index]!;
        const problem = pgTextProblem(key);
        if (problem) found.push({ field: pathOf(step, printable(key)), message: `key ${problem}` });
        else stack.push({ value: (current as Record<string, unknown>)[key], key, parent: step });
      }
    }
  }
  return found;
}

/** Throws a 422 naming every refused string of a request part. */
export function refuseTextPostgresRefuses(value: unknown, where: string | undefined): void {
  const found = refusedTextIn(value, where);
  if (found.length > 0) throw new ValidationError(found, `${found[0]!.field} ${found[0]!.message}`);
}
