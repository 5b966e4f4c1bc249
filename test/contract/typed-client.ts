import type { paths } from './generated/openapi.js';

/**
 * A small client typed only by the types openapi-typescript generates from the served document
 * (generated/openapi.ts): paths, parameters, request bodies and answers all come from there, so `tsc` (npm
 * run typecheck) fails when the document stops describing what a caller needs.
 */
type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
type Path = keyof paths;
type PathsWith<M extends Method> = { [P in Path]: paths[P][M] extends never | undefined ? never : P }[Path];
type Operation<P extends Path, M extends Method> = NonNullable<paths[P][M]>;

type Parameters<O> = O extends { parameters: infer Params } ? Params : never;
type PathParams<O> = Parameters<O> extends { path: infer Values } ? Values : never;
type QueryParams<O> = Parameters<O> extends { query?: infer Values } ? Values : never;
type RequestBody<O> = O extends { requestBody?: infer Declared }
  ? [NonNullable<Declared>] extends [never]
    ? never
    : NonNullable<Declared> extends { content: { 'application/json': infer Body } }
      ? Body
      : never
  : never;
type Responses<O> = O extends { responses: infer R } ? R : never;
type JsonOf<R> = R extends { content: { 'application/json': infer Body } } ? Body : undefined;

/** The statuses the document's `default` (error) answer stands for. */
export type ErrorStatus = 400 | 401 | 403 | 404 | 405 | 409 | 413 | 415 | 422 | 429 | 500 | 503 | 504;

/** Every documented answer, by status: `result.status === 201` narrows `result.body` to the 201 body. */
export type Answer<O> = {
  [S in keyof Responses<O>]: { status: S extends 'default' ? ErrorStatus : S; body: JsonOf<Responses<O>[S]>; headers: Headers };
}[keyof Responses<O>];

export type CallOptions<O> = ([PathParams<O>] extends [never] | [undefined] ? { path?: never } : { path: PathParams<O> }) &
  ([QueryParams<O>] extends [never] | [undefined] ? { query?: never } : { query?: QueryParams<O> }) &
  ([RequestBody<O>] extends [never] ? { body?: never } : { body: RequestBody<O> });

export class TypedClient {
  constructor(
    private readonly baseUrl: string,
    private readonly headers: Record<string, string> = {},
  ) {}

  async call<M extends Method, P extends PathsWith<M>>(
    method: M,
    path: P,
    options: CallOptions<Operation<P, M>>,
  ): Promise<Answer<Operation<P, M>>> {
    const values = (options.path ?? {}) as Record<string, string | number>;
    const url = new URL(
      this.baseUrl + String(path).replace(/\{([a-z_]+)\}/g, (_match, name: string) => encodeURIComponent(String(values[name]))),
    );
    for (const [name, value] of Object.entries((options.query ?? {}) as Record<string, unknown>)) {
      if (value !== undefined) url.searchParams.set(name, Array.isArray(value) ? value.join(',') : String(value));
    }
    const headers: Record<string, string> = { ...this.headers };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(url, {
      method: method.toUpperCase(),
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    const text = await response.text();
    const json = (response.headers.get('content-type') ?? '').includes('json') && text !== '';
    return { status: response.status, body: json ? JSON.parse(text) : undefined, headers: response.headers } as Answer<Operation<P, M>>;
  }
}
