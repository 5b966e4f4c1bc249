import { BlockList, isIP } from 'node:net';

/** IPv4-mapped IPv6 (`::ffff:1.2.3.4`) as the IPv4 address it carries, so one client has one spelling. */
const unmapped = (address: string): string => (/^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(address) ? address.slice(7) : address.toLowerCase());

/**
 * Who sent a request: the peer address, unless that peer is a trusted reverse proxy (TRUSTED_PROXIES), in
 * which case X-Forwarded-For is read from the right, skipping further trusted proxies, and the first address
 * not trusted is the client. A malformed entry stops the walk at the last trusted hop, never at a value the
 * client could have written itself further left.
 */
export class ClientAddresses {
  private readonly trusted = new BlockList();
  private readonly any: boolean;

  constructor(entries: readonly string[]) {
    for (const entry of entries) {
      const [address, prefix] = entry.split('/') as [string, string | undefined];
      const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
      if (prefix === undefined) this.trusted.addAddress(address, family);
      else this.trusted.addSubnet(address, Number(prefix), family);
    }
    this.any = entries.length > 0;
  }

  private isTrusted(address: string): boolean {
    const family = isIP(address);
    return family !== 0 && this.trusted.check(address, family === 6 ? 'ipv6' : 'ipv4');
  }

  /** The client address of a request from `peer` with this X-Forwarded-For header (if any). */
  resolve(peer: string, forwardedFor: string | undefined): string {
    let client = unmapped(peer);
    if (!this.any || !forwardedFor || !this.isTrusted(client)) return client;
    const hops = forwardedFor.split(',').map((hop) => unmapped(hop.trim()));
    for (let index = hops.length - 1; index >= 0; index -= 1) {
      const hop = hops[index]!;
      if (isIP(hop) === 0) break;
      client = hop;
      if (!this.isTrusted(hop)) break;
    }
    return client;
  }
}

/**
 * The key an address is counted under: IPv6 per /64 (one subscriber's prefix, which holds 2^64 addresses),
 * IPv4 as is.
 */
export function addressBucket(address: string): string {
  if (isIP(address) !== 6) return address;
  const [head = '', tail = ''] = address.split('::') as [string, string?];
  const left = head === '' ? [] : head.split(':');
  const right = tail === '' ? [] : tail.split(':');
  const groups = address.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  return `${groups
    .slice(0, 4)
    .map((group) => (parseInt(group, 16) || 0).toString(16))
    .join(':')}::/64`;
}
