import type { RouteDefinition } from '../http/route.js';
import type { GatewayServices } from '../services.js';
import { buildingRoutes } from './buildings.route.js';
import { eventRoutes } from './events.route.js';
import { floorRoutes } from './floors.route.js';
import { geofenceRoutes } from './geofences.route.js';
import { infrastructureRoutes } from './infrastructure.route.js';
import { pathRoutes } from './paths.route.js';
import { poiCategoryRoutes } from './poi-categories.route.js';
import { poiRoutes } from './pois.route.js';

/** A deprecated path served by an existing route (kept out of the OpenAPI document). */
function alias(routes: RouteDefinition[], method: RouteDefinition['method'], path: string, aliasPath: string): RouteDefinition {
  const route = routes.find((candidate) => candidate.method === method && candidate.path === path);
  if (!route) throw new Error(`no route ${method} ${path} to alias`);
  return { ...route, path: aliasPath, hidden: true };
}

/** Spec part 4.2 and the modification endpoints, plus the deprecated `projects` aliases (until SDK 4.0). */
export function cartographyRoutes(services: GatewayServices): RouteDefinition[] {
  const routes = [
    ...buildingRoutes(services),
    ...floorRoutes(services),
    ...poiCategoryRoutes(services),
    ...poiRoutes(services),
    ...eventRoutes(services),
    ...geofenceRoutes(services),
    ...pathRoutes(services),
    ...infrastructureRoutes(services),
  ];
  return [
    ...routes,
    alias(routes, 'GET', '/api/v1/buildings', '/api/v1/projects'),
    alias(routes, 'GET', '/api/v1/buildings/:id', '/api/v1/projects/:id'),
    alias(routes, 'GET', '/api/v1/buildings/:building_id/floors', '/api/v1/projects/:building_id/floors'),
  ];
}
