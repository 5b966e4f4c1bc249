import type { HttpMethod, RouteDefinition } from './route.js';

interface CompiledRoute {
  route: RouteDefinition;
  segments: string[];
  paramCount: number;
}

export type RouteMatch =
  | { kind: 'found'; route: RouteDefinition; params: Record<string, string> }
  | { kind: 'method_not_allowed'; allow: string[] }
  | { kind: 'not_found' };

const ROUTE_METHODS: HttpMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** `/a/b/` and `/a/b` are the same route; so are `//a` and `/a`. */
export function normalisePath(path: string): string {
  const collapsed = path.replace(/\/{2,}/g, '/');
  return collapsed.length > 1 && collapsed.endsWith('/') ? collapsed.slice(0, -1) : collapsed;
}

/**
 * Matches a request to a route. Static segments win over parameters (`/geofences/search` before
 * `/geofences/:id`), so routes are tried with the fewest parameters first.
 */
export class Router {
  private readonly byMethod = new Map<HttpMethod, CompiledRoute[]>();
  private readonly exact = new Map<string, RouteDefinition>();
  readonly routes: RouteDefinition[] = [];

  add(route: RouteDefinition): void {
    const path = normalisePath(route.path);
    const segments = path.split('/').slice(1);
    const paramCount = segments.filter((segment) => segment.startsWith(':')).length;
    const key = `${route.method} ${path}`;
    if (this.exact.has(key) || this.routes.some((r) => r.method === route.method && normalisePath(r.path) === path)) {
      throw new Error(`route registered twice: ${key}`);
    }
    this.routes.push(route);
    if (paramCount === 0) {
      this.exact.set(key, route);
      return;
    }
    const list = this.byMethod.get(route.method) ?? [];
    list.push({ route, segments, paramCount });
    list.sort((a, b) => a.paramCount - b.paramCount);
    this.byMethod.set(route.method, list);
  }

  /**
   * Any method name may come in: HEAD runs the GET route (the server then sends no body); a method the path
   * does not have is a 405 whose `allow` lists those it has, HEAD beside GET and OPTIONS (answered everywhere).
   */
  match(method: string, rawPath: string): RouteMatch {
    const path = normalisePath(rawPath);
    const routeMethod = method === 'HEAD' ? 'GET' : method;
    const found = ROUTE_METHODS.includes(routeMethod as HttpMethod) ? this.find(routeMethod as HttpMethod, path) : undefined;
    if (found) return { kind: 'found', ...found };
    const has = ROUTE_METHODS.filter((m) => this.find(m, path));
    if (has.length === 0) return { kind: 'not_found' };
    return { kind: 'method_not_allowed', allow: [...has, ...(has.includes('GET') ? ['HEAD'] : []), 'OPTIONS'] };
  }

  private find(method: HttpMethod, path: string): { route: RouteDefinition; params: Record<string, string> } | undefined {
    const route = this.exact.get(`${method} ${path}`);
    if (route) return { route, params: {} };
    const segments = path.split('/').slice(1);
    for (const candidate of this.byMethod.get(method) ?? []) {
      const params = matchSegments(candidate.segments, segments);
      if (params) return { route: candidate.route, params };
    }
    return undefined;
  }
}

function matchSegments(pattern: string[], actual: string[]): Record<string, string> | undefined {
  if (pattern.length !== actual.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const expected = pattern[i]!;
    if (expected.startsWith(':')) {
      let value: string;
      try {
        value = decodeURIComponent(actual[i]!);
      } catch {
        return undefined;
      }
      if (value === '') return undefined;
      params[expected.slice(1)] = value;
    } else if (expected !== actual[i]) {
      return undefined;
    }
  }
  return params;
}
