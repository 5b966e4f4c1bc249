import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { lookup as dnsLookupAsync } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * Where a webhook may not go unless WEBHOOK_ALLOW_PRIVATE_ADDRESSES is set: anything that is not public
 * unicast, so a webhook cannot be used to reach the gateway's own network (SSRF). Checked on the address the
 * connection actually uses (after DNS), not only on the URL, so a name that later resolves inwards is refused too.
 * IPv4 goes by a list of what is not public; IPv6 must be global unicast (2000::/3), minus the ranges that carry
 * an IPv4 address inside (6to4, Teredo) or are not routed (documentation): everything else (IPv4-compatible
 * ::/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, site-local fec0::/10, ULA, link-local, multicast) is outside it.
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
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relays
  ['192.168.0.0', 16], // RFC 1918
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  blocked.addSubnet(network, prefix, 'ipv4');
}
const globalUnicast = new BlockList();
globalUnicast.addSubnet('2000::', 3, 'ipv6');
for (const [network, prefix] of [
  ['2001::', 23], // IETF protocol assignments, Teredo (2001::/32) among them
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: an IPv4 address inside
  ['3fff::', 20], // documentation
] as const) {
  blocked.addSubnet(network, prefix, 'ipv6');
}

/** Whether `address` (an IP literal) is loopback, link-local, private, unspecified or otherwise not public. */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) return !globalUnicast.check(address, 'ipv6') || blocked.check(address, 'ipv6');
  return true; // not an address at all
}

/** Names that mean this machine whatever DNS says (RFC 6761), with or without the root's trailing dot. */
const LOCAL_NAME = /(^|\.)localhost\.?$/i;

export class ForbiddenDestinationError extends Error {
  constructor(readonly address: string) {
    super(`refused: ${address} is a loopback, link-local, private or unspecified address`);
    this.name = 'ForbiddenDestinationError';
  }
}

/** The one answer to a URL that may not be used: it says nothing of what a name resolves to, or whether it does. */
export const DESTINATION_PROBLEM = 'must lead to a public address (names must resolve to public unicast addresses only)';

/** How long creating or changing a webhook waits for DNS; a name not resolved by then is refused. */
const LOOKUP_WAIT_MS = 2000;

const bareHost = (hostname: string) => (hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname);

/**
 * Checked when a webhook is created or changed: an IP literal, or every address its name resolves to now. A name
 * that does not resolve (or not in time) is refused too: accepted, it could be pointed inwards later, and the
 * difference between "does not resolve" and "resolves inwards" would tell an admin about internal names. Returns
 * DESTINATION_PROBLEM for the 422, or undefined when the URL may be used.
 */
export async function destinationProblem(url: URL, allowPrivate: boolean): Promise<string | undefined> {
  if (allowPrivate) return undefined;
  const host = bareHost(url.hostname);
  if (isIP(host)) return isForbiddenAddress(host) ? DESTINATION_PROBLEM : undefined;
  if (LOCAL_NAME.test(host)) return DESTINATION_PROBLEM;
  let timer: NodeJS.Timeout | undefined;
  try {
    const gaveUp = new Promise<LookupAddress[]>((resolve) => (timer = setTimeout(() => resolve([]), LOOKUP_WAIT_MS)));
    const addresses = await Promise.race([dnsLookupAsync(host, { all: true }), gaveUp]);
    return addresses.length === 0 || addresses.some((entry) => isForbiddenAddress(entry.address)) ? DESTINATION_PROBLEM : undefined;
  } catch {
    return DESTINATION_PROBLEM;
  } finally {
    clearTimeout(timer);
  }
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
