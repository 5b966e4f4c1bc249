import { describe, expect, it } from 'vitest';
import type { Channels } from '../../gateway/bus-channels.js';
import { LocalBus } from '../../shared/bus/local-bus.js';

/**
 * The gateway's bus is typed by its channel map (gateway/bus-channels.ts). The @ts-expect-error lines are the
 * test that matters: `npx tsc --noEmit` fails if an unknown channel or a wrong payload ever compiles.
 */
describe('the typed bus', () => {
  it('delivers a channel its own payload type, and refuses unknown channels and wrong payloads at compile time', async () => {
    const bus = new LocalBus<Channels>();
    const seen: string[] = [];
    await bus.subscribe('devices:changed', (change) => void seen.push(`${change.organizationId}/${change.identifier}`));
    await bus.publish('devices:changed', { organizationId: 'org', identifier: 'phone' });
    // Never called: only compiled.
    const refused = async () => {
      // @ts-expect-error: no such channel in the map
      await bus.publish('device-changed', { organizationId: 'org', identifier: 'phone' });
      // @ts-expect-error: the payload of another channel
      await bus.publish('devices:changed', { organizationId: 'org', buildingId: 1 });
    };
    void refused;
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(seen).toEqual(['org/phone']);
    await bus.close();
  });
});
