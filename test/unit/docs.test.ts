import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configSchema } from '../../shared/config.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

describe('README', () => {
  it('documents every configuration variable, and no variable that does not exist', () => {
    const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1));
    const documented = [...section.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((match) => match[1]);
    expect(documented.sort()).toEqual(Object.keys(configSchema.shape).sort());
  });

  it('has exactly the two quick-start commands', () => {
    const quickStart = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('## Try it'));
    const commands = [...quickStart.matchAll(/```sh\n([^`]+)```/g)].map((match) => match[1]!.trim());
    expect(commands).toEqual(['npm ci && npm start', 'npm ci && npm test']);
  });
});
