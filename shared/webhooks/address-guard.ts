import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { lookup as dnsLookupAsync } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * Where a webhook may not go unless WEBHOOK_ALLOW_PRIVATE_ADDRESSES is set: anything that is not public
 * unicast, so a webhook cannot be used to reach the gateway's own network (SSRF). Checked on the address the
 * connection actually uses (after DNS), not only on the URL, so a name that later resolves inwards is refused too.
 */
const blocked = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // unspecified, "this network"
  ['10.0.0.0', 8], // RFC 1918
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata endpoints live here)
  ['172.16.0.0', 12], // RFC 1918
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.168.0.0', 16], // RFC 1918
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  blocked.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['64:ff9b::', 96], // NAT64 of any IPv4, private ones included
  ['fc00::', 7], // unique local (ULA)
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
] as const) {
  blocked.addSubnet(network, prefix, 'ipv6');
}

/** IPv4-mapped IPv6 (`::ffff:a.b.c.d`, or `::ffff:7f00:1` as URLs write it): refused outright, a way round the IPv4 rules. */
const MAPPED_V4 = /^::ffff:/i;

/** Whether `address` (an IP literal) is loopback, link-local, private, unspecified or otherwise not public. */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 6 && MAPPED_V4.test(address)) return true;
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) return blocked.check(address, 'ipv6');
  return true; // not an address at all
}

export class ForbiddenDestinationError extends Error {
  constructor(readonly address: string) {
    super(`refused: ${address} is a loopback, link-local, private or unspecified address`);
    this.name = 'ForbiddenDestinationError';
  }
}

/** How long creating or changing a webhook waits for DNS before accepting the name unresolved. */
const LOOKUP_WAIT_MS = 2000;

const bareHost = (hostname: string) => (hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname);

/**
 * Checked when a webhook is created or changed: an IP literal, or every address its name resolves to now.
 * Returns a message for the 422, or undefined when it may be used. A name that does not resolve yet is
 * accepted: it is checked again at every delivery.
 */
export async function destinationProblem(url: URL, allowPrivate: boolean): Promise<string | undefined> {
  if (allowPrivate) return undefined;
  const host = bareHost(url.hostname);
  if (isIP(host)) return isForbiddenAddress(host) ? `${host} is a loopback, link-local, private or unspecified address` : undefined;
  let addresses: LookupAddress[];
  let timer: NodeJS.Timeout | undefined;
  try {
    // A resolver that does not answer must not hold the request: unresolved is accepted (checked at delivery).
    const gaveUp = new Promise<LookupAddress[]>((resolve) => (timer = setTimeout(() => resolve([]), LOOKUP_WAIT_MS)));
    addresses = await Promise.race([dnsLookupAsync(host, { all: true }), gaveUp]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
  const bad = addresses.find((entry) => isForbiddenAddress(entry.address));
  return bad ? `${host} resolves to ${bad.address}, a loopback, link-local, private or unspecified address` : undefined;
}

/**
 * A `lookup` for node:http(s) that refuses forbidden addresses, so the check and the connection use the same
 * answer (no window for DNS rebinding between them).
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return ((hostname: string, options: { all?: boolean; family?: number }, callback: (...args: unknown[]) => void) => {
    dnsLookup(hostname, { family: options.family ?? 0, all: true }, (error, addresses) => {
      if (error) return callback(error);
      const list = addresses as LookupAddress[];
      const bad = allowPrivate ? undefined : list.find((entry) => isForbiddenAddress(entry.address));
      if (bad) return callback(new ForbiddenDestinationError(bad.address));
      if (list.length === 0) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }));
      if (options.all) return callback(null, list);
      callback(null, list[0]!.address, list[0]!.family);
    });
  }) as unknown as LookupFunction;
}

/** The IP literal of a URL's host, if it is one (node does not call `lookup` for those: they are checked apart). */
export const literalAddress = (url: URL): string | undefined => {
  const host = bareHost(url.hostname);
  return isIP(host) ? host : undefined;
};
