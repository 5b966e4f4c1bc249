import type { MetricSources } from '../shared/metrics/metrics.js';
import { databasePoolSource } from '../shared/metrics/database-pool.js';
import type { GatewayServices } from './services.js';

/**
 * What a gateway reports at scrape time (shared/metrics/metrics.ts): sockets, the job queue, the database pool,
 * the group-commit backlog, the cluster as this member sees it, and the size of every bounded in-memory map, read from the objects that own them.
 */
export function gatewayMetricSources(services: GatewayServices): MetricSources {
  const { websockets, jobs, storage, writer, registry, devices, detection, realtime, routing, cluster } = services;
  return {
    websockets: () => websockets.stats(),
    jobs: () => jobs.stats(),
    databasePool: databasePoolSource(storage),
    writerBacklog: () => writer.backlog,
    cluster: () => cluster.view(),
    watermarks: () => detection.engine.watermarks(),
    maps: () => {
      const buildings = registry.stats();
      return {
        building_runtimes: buildings.loaded.size,
        absent_buildings: buildings.absent.size,
        organization_buildings: buildings.organizations.size,
        buildings_loading: buildings.loading,
        device_directory: devices.stats().size,
        detection_tracked_devices: detection.engine.trackedDevices,
        detection_outbox: detection.outbox.size,
        detection_dead_letters: detection.outbox.deadLetterCount,
        live_positions: realtime.live.size,
        routing_graphs: routing.cachedGraphs,
        cluster_waiting_positions: cluster.waitingRecords,
      };
    },
  };
}
