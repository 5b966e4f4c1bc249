import http from 'node:http';
import https from 'node:https';
import { ForbiddenDestinationError, guardedLookup, isForbiddenAddress, literalAddress } from './address-guard.js';

export interface SendOptions {
  timeoutMs: number;
  allowPrivate: boolean;
}

/**
 * What one attempt came to: a 2xx is delivered; anything else (3xx included: no redirect is followed) is not.
 * `error` is what the webhook's admin reads (`last_error`): generic, so deliveries cannot be used to learn what a
 * name resolves to or which ports answer; `detail` is the system's own message, for the process log only.
 */
export interface SendOutcome {
  ok: boolean;
  status: number | null;
  error: string | null;
  detail?: string;
  durationMs: number;
}

export const REFUSED_DESTINATION = 'refused: not a public address';
const COULD_NOT_CONNECT = 'could not connect';

/** Most receivers answer a few bytes; an answer is never read past this. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * POSTs one delivery with node:http(s): no redirects (node follows none), the destination checked after DNS,
 * and the whole attempt (DNS, connect, answer) bounded by `timeoutMs`.
 */
export function send(target: string, body: string, headers: Record<string, string>, options: SendOptions): Promise<SendOutcome> {
  const started = performance.now();
  const done = (ok: boolean, status: number | null, error: string | null, detail?: string): SendOutcome => ({
    ok,
    status,
    error,
    detail,
    durationMs: Math.round(performance.now() - started),
  });
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return Promise.resolve(done(false, null, 'invalid URL'));
  }
  const literal = literalAddress(url);
  if (literal && !options.allowPrivate && isForbiddenAddress(literal))
    return Promise.resolve(done(false, null, REFUSED_DESTINATION, new ForbiddenDestinationError(literal).message));
  const client = url.protocol === 'https:' ? https : url.protocol === 'http:' ? http : undefined;
  if (!client) return Promise.resolve(done(false, null, `unsupported protocol ${url.protocol}`));
  return new Promise<SendOutcome>((resolve) => {
    let settled = false;
    const finish = (outcome: SendOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const request = client.request(
      url,
      {
        method: 'POST',
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'user-agent': 'Floorcast-Webhooks/1',
        },
        lookup: guardedLookup(options.allowPrivate),
        agent: false, // a fresh connection: a pooled one could outlive the address check
      },
      (response) => {
        const status = response.statusCode ?? 0;
        let read = 0;
        response.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_RESPONSE_BYTES) response.destroy();
        });
        const end = () =>
          finish(
            done(
              status >= 200 && status < 300,
              status,
              status >= 200 && status < 300 ? null : status >= 300 && status < 400 ? `redirect (${status}) not followed` : `HTTP ${status}`,
            ),
          );
        response.on('end', end);
        response.on('close', end);
        response.on('error', end);
      },
    );
    const timer = setTimeout(() => {
      finish(done(false, null, `timed out after ${options.timeoutMs} ms`));
      request.destroy();
    }, options.timeoutMs);
    request.on('error', (error) =>
      finish(done(false, null, error instanceof ForbiddenDestinationError ? REFUSED_DESTINATION : COULD_NOT_CONNECT, error.message)),
    );
    request.end(body);
  });
}
