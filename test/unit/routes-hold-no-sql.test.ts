import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * Routes parse, authorize, call and present: their queries live in the stores beside the services (issue 29).
 * This reads every route file's syntax tree and names what would put SQL back: a string or template holding SQL,
 * a call that runs text on the connection, or an `as never` cast (how a query the ORM's types refuse gets past
 * them: gateway/http/whole-or-paged.ts `findPage` builds the typed order instead).
 */
const ROUTES = join(import.meta.dirname, '../../gateway/routes');
const SQL = /\bselect\b[\s\S]*\bfrom\b|\binsert\s+into\b|\bdelete\s+from\b|\bupdate\s+\w+\s+set\b|\bon\s+conflict\b/i;
const RUNS_TEXT = new Set(['execute', 'executeBound', 'getKnex', 'raw', 'getConnection']);

function sqlIn(fileName: string, source: string): string[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const where = (node: ts.Node) => `${fileName}:${file.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
      if (SQL.test(node.text)) found.push(`${where(node)} SQL text: ${node.text.slice(0, 60)}`);
    } else if (ts.isTemplateExpression(node)) {
      const text = [node.head.text, ...node.templateSpans.map((span) => span.literal.text)].join(' ? ');
      if (SQL.test(text)) found.push(`${where(node)} SQL text: ${text.slice(0, 60)}`);
    } else if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && RUNS_TEXT.has(node.expression.name.text)) {
      found.push(`${where(node)} runs text: .${node.expression.name.text}()`);
    } else if (ts.isAsExpression(node) && node.type.kind === ts.SyntaxKind.NeverKeyword) {
      found.push(`${where(node)} casts to never: ${node.expression.getText(file).slice(0, 60)}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

describe('routes hold no SQL', () => {
  it('finds SQL text and text-running calls (the check can fail)', () => {
    expect(sqlIn('a.ts', "await storage.execute('select width from images where id = ?', [id]);")).toEqual([
      'a.ts:1 runs text: .execute()',
      'a.ts:1 SQL text: select width from images where id = ?',
    ]);
    const dollar = '$';
    expect(sqlIn('b.ts', `const q = \`insert into t (a) values (${dollar}{a})\`;`)).toHaveLength(1);
    expect(sqlIn('c.ts', 'tx.getKnex();')).toEqual(['c.ts:1 runs text: .getKnex()']);
    expect(sqlIn('e.ts', 'em.find(S, where, { orderBy: orderBy as never });')).toEqual(['e.ts:1 casts to never: orderBy']);
    // Words in prose and messages are not SQL.
    expect(sqlIn('d.ts', "// select the rows from the list\nthrow new ConflictError('Update the floor first');")).toEqual([]);
  });

  it('no file in gateway/routes', () => {
    const files = readdirSync(ROUTES).filter((name) => name.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(20);
    expect(files.flatMap((name) => sqlIn(name, readFileSync(join(ROUTES, name), 'utf8')))).toEqual([]);
  });
});
