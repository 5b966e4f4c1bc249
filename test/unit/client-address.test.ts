import { describe, expect, it } from 'vitest';
import { ClientAddresses, addressBucket } from '../../gateway/http/client-address.js';

describe('client addresses (issue 28 item 4)', () => {
  it('reads X-Forwarded-For only from a trusted peer, from the right, skipping trusted hops', () => {
    const addresses = new ClientAddresses(['10.0.0.0/8', '::1']);
    expect(addresses.resolve('203.0.113.5', '198.51.100.1')).toBe('203.0.113.5'); // untrusted peer: header ignored
    expect(addresses.resolve('10.1.2.3', '198.51.100.1')).toBe('198.51.100.1');
    expect(addresses.resolve('10.1.2.3', '6.6.6.6, 198.51.100.1, 10.9.9.9')).toBe('198.51.100.1');
    expect(addresses.resolve('::ffff:10.1.2.3', '198.51.100.1')).toBe('198.51.100.1');
    expect(addresses.resolve('::1', 'not-an-address, 198.51.100.7')).toBe('198.51.100.7');
    expect(addresses.resolve('::1', '198.51.100.7, garbage')).toBe('::1'); // a malformed last hop stops the walk
    expect(addresses.resolve('10.1.2.3', undefined)).toBe('10.1.2.3');
    expect(new ClientAddresses([]).resolve('10.1.2.3', '198.51.100.1')).toBe('10.1.2.3');
  });

  it('counts IPv6 per /64 and IPv4 as is', () => {
    expect(addressBucket('2001:db8:1:2::5')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('2001:db8:1:2:ffff:ffff:ffff:ffff')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('2001:0db8:0001:0002::1')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('::1')).toBe('0:0:0:0::/64');
    expect(addressBucket('198.51.100.1')).toBe('198.51.100.1');
  });
});
