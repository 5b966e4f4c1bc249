import type { Bus } from '../bus-channels.js';
import type { Logger } from '../../shared/logger.js';
import type { RealtimeService } from '../realtime/realtime-service.js';
import type { EvacuationService } from './evacuation-service.js';

/**
 * Feeds evacuations from what the building's owner already produces, without a step of its own in detection:
 * the stored zone enter events (an assembly point is a geofence, so reaching it is an `enter`) and the live
 * positions (someone new in an evacuated building is an arrival). Only the owner of a building acts on them;
 * the roll's conditional updates make a repeat, or a second gateway acting during a takeover, change nothing.
 */
export async function attachMusterDetection(
  { bus, realtime, evacuations, logger }: { bus: Bus; realtime: RealtimeService; evacuations: EvacuationService; logger: Logger },
  owns: (buildingId: number) => boolean,
): Promise<void> {
  const failed = (error: unknown) => logger.error({ err: error }, 'evacuation roll update failed');
  await bus.subscribe('zone-events', ({ zoneEvents }) => {
    for (const event of zoneEvents) {
      if (event.type === 'enter' && event.zoneKind === 'geofence' && owns(event.buildingId))
        void evacuations.reachedPoint(event).catch(failed);
    }
  });
  realtime.onFreshPositions((records) => void evacuations.positions(records, owns).catch(failed));
}
