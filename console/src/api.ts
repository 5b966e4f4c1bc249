import type {
  Alarm,
  AlarmState,
  Building,
  BuildingDetail,
  Floor,
  Group,
  MyPrivacy,
  PoiCategory,
  PositionFeature,
  RankedDevice,
  ReportResult,
  Route,
  TrailResult,
} from './model.js';
import type { EvacuationDetail, RollEntry } from './evacuation-model.js';

/** The flat error body every route answers with. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

interface Page<T> {
  data: T[];
}

/**
 * The REST calls the console makes, all on this origin and all with the Bearer token (held in memory; never
 * put in a URL). A 401 means the session is over: `onUnauthorized` signs the operator out.
 */
export class Api {
  constructor(
    private readonly token: string,
    private readonly onUnauthorized: (message: string) => void,
  ) {}

  static async signIn(email: string, password: string): Promise<{ access_token: string }> {
    // btoa only takes Latin-1: encode UTF-8 first so any e-mail or password survives.
    const credentials = btoa(String.fromCharCode(...new TextEncoder().encode(`${email}:${password}`)));
    const response = await fetch('/api/v1/auth/access_tokens', {
      method: 'POST',
      headers: { authorization: `Basic ${credentials}` },
      cache: 'no-store',
    });
    if (!response.ok) throw await errorOf(response);
    return (await response.json()) as { access_token: string };
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
    if (!response.ok) {
      const error = await errorOf(response);
      if (response.status === 401) this.onUnauthorized(error.message);
      throw error;
    }
    return (response.status === 204 ? undefined : await response.json()) as T;
  }

  buildings(): Promise<Building[]> {
    return this.request('GET', '/api/v1/buildings?view=compact');
  }

  building(id: number): Promise<BuildingDetail> {
    return this.request('GET', `/api/v1/buildings/${id}`);
  }

  async floors(): Promise<Floor[]> {
    const answer = await this.request<Floor[] | Page<Floor>>('GET', '/api/v1/floors?size=1000');
    return Array.isArray(answer) ? answer : answer.data;
  }

  /** Users' names for labels; only managers may list users, so anyone else just gets ids. */
  async userNames(): Promise<Map<string, string>> {
    try {
      const page = await this.request<Page<{ id: string; full_name: string; email: string }>>('GET', '/api/v1/users?size=1000');
      return new Map(page.data.map((user) => [user.id, user.full_name || user.email]));
    } catch (error) {
      if (error instanceof ApiError && error.status === 403) return new Map();
      throw error;
    }
  }

  /** What is kept about the signed-in person, and whether they are tracked now (issue 32). */
  myPrivacy(): Promise<MyPrivacy> {
    return this.request('GET', '/api/v1/users/me/privacy');
  }

  async livePositions(buildingId: number): Promise<PositionFeature[]> {
    const collection = await this.request<{ features: PositionFeature[] }>('GET', `/api/v1/real_time/building/${buildingId}`);
    return collection.features;
  }

  /** Every active alarm (up to 1,000, worst first) and the latest others, for the inbox. */
  async alarms(recent = 100): Promise<Alarm[]> {
    const [active, latest] = await Promise.all([
      this.request<Page<Alarm>>('GET', '/api/v1/alarms?state=OPEN,CONFIRMED,OTHER&size=1000'),
      this.request<Page<Alarm>>('GET', `/api/v1/alarms?size=${recent}&sort=created_at,desc`),
    ]);
    return [...new Map([...latest.data, ...active.data].map((alarm) => [alarm.id, alarm])).values()];
  }

  alarm(id: string): Promise<Alarm> {
    return this.request('GET', `/api/v1/alarms/${encodeURIComponent(id)}`);
  }

  changeAlarmState(id: string, state: AlarmState, comment?: string): Promise<Alarm> {
    return this.request('PATCH', `/api/v1/alarms/${encodeURIComponent(id)}`, comment ? { state, comment } : { state });
  }

  /** One state change for many alarms (POST /api/v1/alarms/bulk); how many changed. */
  bulkChangeState(
    ids: string[],
    state: AlarmState,
    comment: string,
  ): Promise<{ changed: number; changed_ids: string[]; skipped: { id: string; reason: string }[] }> {
    return this.request('POST', '/api/v1/alarms/bulk', { ids, state, comment });
  }

  /** Groups (for the responders picker); only managers may list them, anyone else gets none. */
  async groups(): Promise<Group[]> {
    try {
      const answer = await this.request<Group[] | Page<Group>>('GET', '/api/v1/groups?size=1000');
      return Array.isArray(answer) ? answer : answer.data;
    } catch (error) {
      if (error instanceof ApiError && error.status === 403) return [];
      throw error;
    }
  }

  /** The POI categories the organization sees (its own and the public ones), for the map's POI icons. */
  async poiCategories(): Promise<PoiCategory[]> {
    const answer = await this.request<PoiCategory[] | Page<PoiCategory>>('GET', '/api/v1/poi_categories');
    return Array.isArray(answer) ? answer : answer.data;
  }

  nearestDevices(
    buildingId: number,
    floorId: number,
    x: number,
    y: number,
    groupId: string | null,
    limit = 5,
  ): Promise<{ data: RankedDevice[] }> {
    const query = new URLSearchParams({ floor_id: String(floorId), x: String(x), y: String(y), limit: String(limit) });
    if (groupId) query.set('group_id', groupId);
    return this.request('GET', `/api/v1/buildings/${buildingId}/nearest_devices?${query}`);
  }

  routeToAlarm(buildingId: number, fromDeviceId: string, alarmId: string): Promise<Route> {
    const query = new URLSearchParams({ from_device_id: fromDeviceId, to_alarm_id: alarmId });
    return this.request('GET', `/api/v1/buildings/${buildingId}/route?${query}`);
  }

  /** An evacuation of a building with its roll (`current`: the active one; 404 when there is none). */
  evacuation(buildingId: number, id: string): Promise<EvacuationDetail> {
    return this.request('GET', `/api/v1/buildings/${buildingId}/evacuations/${encodeURIComponent(id)}`);
  }

  declareEvacuation(buildingId: number, body: { drill: boolean; note?: string }): Promise<EvacuationDetail> {
    return this.request('POST', `/api/v1/buildings/${buildingId}/evacuations`, body);
  }

  endEvacuation(buildingId: number, id: string): Promise<EvacuationDetail> {
    return this.request('POST', `/api/v1/buildings/${buildingId}/evacuations/${encodeURIComponent(id)}/end`);
  }

  /** A warden marks a person on the roll safe (safe_manual), with a comment. */
  markSafe(buildingId: number, id: string, entry: string, comment: string): Promise<RollEntry> {
    const path = `/api/v1/buildings/${buildingId}/evacuations/${encodeURIComponent(id)}/roll/${encodeURIComponent(entry)}/safe`;
    return this.request('POST', path, comment ? { comment } : {});
  }

  /** The rescuers' route from the nearest assembly point to a missing person's last known place. */
  rescueRoute(buildingId: number, id: string, entry: string): Promise<{ assembly_point: { id: string; name: string }; route: Route }> {
    const path = `/api/v1/buildings/${buildingId}/evacuations/${encodeURIComponent(id)}/roll/${encodeURIComponent(entry)}/route`;
    return this.request('GET', path);
  }

  /** A device's trail in a building over [from, to), each fix with its arrival and whether it came late. */
  trail(buildingId: number, deviceId: string, from: number, to: number): Promise<TrailResult> {
    const params = new URLSearchParams({ device_id: deviceId, from: new Date(from).toISOString(), to: new Date(to).toISOString() });
    return this.request('GET', `/api/v1/buildings/${buildingId}/trail?${params}`);
  }

  report<Row>(name: string, params: Record<string, string>): Promise<ReportResult<Row>> {
    return this.request('GET', `/api/v1/reports/${name}.json?${new URLSearchParams(params)}`);
  }

  /** A report's CSV as a blob: URL (the token travels in a header, so a plain link cannot fetch it); the caller revokes it. */
  async reportCsvUrl(name: string, params: Record<string, string>): Promise<string> {
    return this.blobUrl(`/api/v1/reports/${name}.csv?${new URLSearchParams(params)}`);
  }

  /** A protected image (floorplans need the token) as a blob: URL; the caller revokes it. */
  imageUrl(path: string): Promise<string> {
    return this.blobUrl(path);
  }

  private async blobUrl(path: string): Promise<string> {
    const response = await fetch(path, { headers: { authorization: `Bearer ${this.token}` } });
    if (!response.ok) {
      const error = await errorOf(response);
      if (response.status === 401) this.onUnauthorized(error.message);
      throw error;
    }
    return URL.createObjectURL(await response.blob());
  }
}

async function errorOf(response: Response): Promise<ApiError> {
  try {
    const body = (await response.json()) as { code?: string; message?: string };
    return new ApiError(response.status, body.code ?? 'error', body.message ?? response.statusText);
  } catch {
    return new ApiError(response.status, 'error', response.statusText || `HTTP ${response.status}`);
  }
}
