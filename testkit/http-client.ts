/** A tiny fetch wrapper for integration tests: JSON in, `{ status, headers, body }` out. */
export interface TestResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export class TestClient {
  constructor(
    readonly baseUrl: string,
    private readonly defaultHeaders: Record<string, string> = {},
  ) {}

  withHeaders(headers: Record<string, string>): TestClient {
    return new TestClient(this.baseUrl, { ...this.defaultHeaders, ...headers });
  }

  withToken(token: string): TestClient {
    return this.withHeaders({ authorization: `Bearer ${token}` });
  }

  async request<T = any>(
    method: string,
    path: string,
    options: { body?: unknown; raw?: string | Buffer; headers?: Record<string, string> } = {},
  ): Promise<TestResponse<T>> {
    const headers: Record<string, string> = { ...this.defaultHeaders, ...options.headers };
    let body: string | Buffer | undefined;
    if (options.raw !== undefined) body = options.raw;
    else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const response = await fetch(this.baseUrl + path, { method, headers, body: body as BodyInit | undefined });
    const text = await response.text();
    let parsed: unknown;
    if (text && (response.headers.get('content-type') ?? '').includes('json')) parsed = JSON.parse(text);
    return { status: response.status, headers: response.headers, body: parsed as T, text };
  }

  /** A GET whose body is binary (a zip): its bytes, untouched. */
  async bytes(path: string): Promise<{ status: number; headers: Headers; bytes: Buffer }> {
    const response = await fetch(this.baseUrl + path, { headers: this.defaultHeaders });
    return { status: response.status, headers: response.headers, bytes: Buffer.from(await response.arrayBuffer()) };
  }

  get<T = any>(path: string, headers?: Record<string, string>) {
    return this.request<T>('GET', path, { headers });
  }
  post<T = any>(path: string, body?: unknown, headers?: Record<string, string>) {
    return this.request<T>('POST', path, { body, headers });
  }
  put<T = any>(path: string, body?: unknown) {
    return this.request<T>('PUT', path, { body });
  }
  patch<T = any>(path: string, body?: unknown) {
    return this.request<T>('PATCH', path, { body });
  }
  delete<T = any>(path: string) {
    return this.request<T>('DELETE', path);
  }
}

export const basicAuth = (email: string, password: string) => `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}`;
