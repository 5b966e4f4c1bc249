/**
 * The few HTTP calls the demo makes, through the public API only (so the seeder and the simulator work against
 * any gateway). Every non-2xx answer throws with the route and the gateway's error body.
 */
export class DemoApiError extends Error {
  constructor(
    readonly status: number,
    readonly route: string,
    body: string,
  ) {
    super(`${route} answered ${status}: ${body.slice(0, 500)}`);
    this.name = 'DemoApiError';
  }
}

export type Credentials = { token: string } | { apiKey: string } | { email: string; password: string };

export class DemoApi {
  constructor(
    readonly baseUrl: string,
    private readonly credentials: Credentials,
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
  }

  /** A client signed in with a JWT from e-mail and password (Basic), so later calls skip the password hash. */
  static async signIn(baseUrl: string, email: string, password: string): Promise<DemoApi> {
    const basic = new DemoApi(baseUrl, { email, password });
    const tokens = await basic.request<{ access_token: string }>('POST', '/api/v1/auth/access_tokens');
    return new DemoApi(baseUrl, { token: tokens.access_token });
  }

  private headers(): Record<string, string> {
    const c = this.credentials;
    if ('token' in c) return { authorization: `Bearer ${c.token}` };
    if ('apiKey' in c) return { 'x-api-key': c.apiKey };
    return { authorization: `Basic ${Buffer.from(`${c.email}:${c.password}`).toString('base64')}` };
  }

  async request<T = any>(method: string, path: string, body?: unknown, init: { form?: FormData; signal?: AbortSignal } = {}): Promise<T> {
    const headers = this.headers();
    let payload: BodyInit | undefined;
    if (init.form) payload = init.form;
    else if (body !== undefined) {
      payload = JSON.stringify(body);
      headers['content-type'] = 'application/json';
    }
    const response = await fetch(this.baseUrl + path, {
      method,
      headers,
      body: payload,
      signal: init.signal ?? AbortSignal.timeout(15_000),
    });
    const text = await response.text();
    if (!response.ok) throw new DemoApiError(response.status, `${method} ${path}`, text);
    return (text && (response.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : undefined) as T;
  }

  get<T = any>(path: string) {
    return this.request<T>('GET', path);
  }
  post<T = any>(path: string, body?: unknown) {
    return this.request<T>('POST', path, body);
  }
  put<T = any>(path: string, body?: unknown) {
    return this.request<T>('PUT', path, body);
  }
  patch<T = any>(path: string, body?: unknown) {
    return this.request<T>('PATCH', path, body);
  }
  delete<T = any>(path: string) {
    return this.request<T>('DELETE', path);
  }
}
