import type { PositionHandOff, RequestedAlarmRaiser } from '../gateway/pipeline/ports.js';

/** The pipeline's detection ports doing nothing: for tests of enrichment and persistence alone. */
export const idlePorts: { alarms: RequestedAlarmRaiser; owners: PositionHandOff } = {
  alarms: { raise: async () => undefined },
  owners: { admit: () => undefined, handOff: async () => undefined },
};
