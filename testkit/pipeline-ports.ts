import type { LivePositions, PositionHandOff, RequestedAlarmRaiser } from '../gateway/pipeline/ports.js';

/** The pipeline's detection and live ports doing nothing: for tests of enrichment and persistence alone. */
export const idlePorts: { alarms: RequestedAlarmRaiser; owners: PositionHandOff; live: LivePositions } = {
  alarms: { raise: async () => undefined },
  owners: { admit: () => undefined, handOff: async () => undefined },
  live: { publish: async () => new Map() },
};
