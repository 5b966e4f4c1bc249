import './styles.css';
import { AlarmInbox } from './alarm-inbox.js';
import { Announcer } from './announcer.js';
import { Api, ApiError } from './api.js';
import { byId, h, setText } from './dom.js';
import { FloorMap, ago } from './floor-map.js';
import { EvacuationView } from './evacuation-view.js';
import { DayReport, deviceTrail, floorHeat, responderRoute } from './insights.js';
import { LiveSocket, type ConnectionState } from './live-socket.js';
import {
  typeLabel,
  ALARM_SEVERITIES,
  ALARM_TYPES,
  type Alarm,
  type AlarmState,
  type Building,
  type BuildingDetail,
  type Floor,
} from './model.js';
import { responderGroup } from './walk-time.js';
import { clearSession, loadSession, saveSession, sessionOf, type Session } from './session.js';

/**
 * The control-room console: sign in, pick a building and floor, watch devices move on the plan, work the
 * alarm inbox. One ControlRoom per signed-in session; signing out stops it and forgets everything.
 */

const ui = {
  connection: byId('connection'),
  session: byId('session'),
  userEmail: byId('user-email'),
  tracking: byId('tracking'),
  sound: byId<HTMLButtonElement>('sound'),
  signOut: byId<HTMLButtonElement>('sign-out'),
  loginView: byId('login-view'),
  loginForm: byId<HTMLFormElement>('login-form'),
  email: byId<HTMLInputElement>('email'),
  password: byId<HTMLInputElement>('password'),
  loginError: byId('login-error'),
  signIn: byId<HTMLButtonElement>('sign-in'),
  consoleView: byId('console-view'),
  banner: byId('announce'),
  bannerText: byId('announce-text'),
  bannerMore: byId('announce-more'),
  bannerShow: byId<HTMLButtonElement>('announce-show'),
  bannerAck: byId<HTMLButtonElement>('announce-ack'),
  bannerAckAll: byId<HTMLButtonElement>('announce-ack-all'),
  building: byId<HTMLSelectElement>('building'),
  floor: byId<HTMLSelectElement>('floor'),
  map: byId('map'),
  mapSummary: byId('map-summary'),
  alarmsHeading: byId('alarms-heading'),
  activeOnly: byId<HTMLInputElement>('active-only'),
  inboxError: byId('inbox-error'),
  alarms: byId<HTMLOListElement>('alarms'),
  alarmType: byId<HTMLSelectElement>('alarm-type'),
  alarmSeverity: byId<HTMLSelectElement>('alarm-severity'),
  bulk: byId('bulk'),
  bulkCount: byId('bulk-count'),
  bulkComment: byId<HTMLInputElement>('bulk-comment'),
  bulkClose: byId<HTMLButtonElement>('bulk-close'),
  bulkFalse: byId<HTMLButtonElement>('bulk-false'),
  bulkStatus: byId('bulk-status'),
  responders: byId<HTMLSelectElement>('responders'),
  trailMinutes: byId<HTMLSelectElement>('trail-minutes'),
  heatmap: byId<HTMLSelectElement>('heatmap'),
  routeSummary: byId('route-summary'),
  trailSummary: byId('trail-summary'),
  reportDay: byId<HTMLInputElement>('report-day'),
  reportShow: byId<HTMLButtonElement>('report-show'),
  reportStatus: byId('report-status'),
  visitorsChart: byId('visitors-chart'),
  stayChart: byId('stay-chart'),
  evacuation: byId('evacuation'),
};

const VIEW_KEY = 'floorcast.console.view';
/** Seconds between asking who is tracked now (the operator's own indicator, and the people on the map). */
const TRACKING_REFRESH_TICKS = 30;
const MANAGERS = new Set(['admin', 'user_manager']);

class ControlRoom {
  private readonly api: Api;
  private readonly map: FloorMap;
  private readonly inbox: AlarmInbox;
  private readonly announcer: Announcer;
  private live: LiveSocket | null = null;
  private readonly buildings = new Map<number, Building>();
  private readonly floors = new Map<number, Floor>();
  private readonly details = new Map<number, BuildingDetail>();
  private users = new Map<string, string>();
  private building: BuildingDetail | null = null;
  private floor: Floor | null = null;
  private connection: ConnectionState = { kind: 'connecting' };
  private ticker: number | undefined;
  private expiry: number | undefined;
  private stopped = false;
  private readonly cleanups: (() => void)[] = [];
  private readonly report: DayReport;
  /** The evacuation view, for those who may follow a roll (admins and user managers). */
  private readonly evacuation: EvacuationView | null;
  /** The device whose trail is shown, and counters that drop answers overtaken by a newer request. */
  private trailDevice: string | null = null;
  private readonly latest = { route: 0, trail: 0, heat: 0, view: 0 };
  /** Loads of the shown building/floor under way: while any is, the map pane says aria-busy (the page's ready marker). */
  private loadingView = 0;

  constructor(
    private readonly session: Session,
    private readonly signOut: (message?: string) => void,
  ) {
    this.api = new Api(session.token, (message) => this.signOut(`Signed out: ${message}`));
    this.map = new FloorMap(
      ui.map,
      ui.mapSummary,
      () => this.api,
      (userId) => (userId ? (this.users.get(userId) ?? null) : null),
      (deviceId) => void this.showTrail(deviceId),
    );
    this.report = new DayReport(() => this.api, { status: ui.reportStatus, visitors: ui.visitorsChart, stays: ui.stayChart });
    this.announcer = new Announcer(
      { banner: ui.banner, text: ui.bannerText, more: ui.bannerMore, soundButton: ui.sound },
      (alarm) => `${typeLabel(alarm.type)} · ${this.who(alarm)} · ${this.where(alarm)}`,
    );
    this.inbox = new AlarmInbox(
      ui.alarms,
      ui.alarmsHeading,
      {
        canManage: MANAGERS.has(session.role),
        who: (alarm) => this.who(alarm),
        where: (alarm) => this.where(alarm),
        select: (alarm) => void this.showAlarm(alarm),
        act: (alarm, state, comment) => this.changeState(alarm, state, comment),
        bulk: (ids, state, comment) => this.bulkChange(ids, state, comment),
        unacknowledged: (alarms) => this.announcer.update(alarms),
      },
      {
        type: ui.alarmType,
        severity: ui.alarmSeverity,
        bulk: ui.bulk,
        bulkCount: ui.bulkCount,
        bulkComment: ui.bulkComment,
        bulkClose: ui.bulkClose,
        bulkFalse: ui.bulkFalse,
        bulkStatus: ui.bulkStatus,
      },
    );
    this.evacuation = MANAGERS.has(session.role)
      ? new EvacuationView(ui.evacuation, { api: () => this.api, userName: (userId) => this.users.get(userId) ?? null })
      : null;
    ui.alarmSeverity.replaceChildren(
      h('option', { value: '' }, 'all'),
      ...ALARM_SEVERITIES.map((severity) => h('option', { value: severity }, severity)),
    );
    ui.alarmType.replaceChildren(
      h('option', { value: '' }, 'all'),
      ...ALARM_TYPES.map((type) => h('option', { value: type }, typeLabel(type))),
    );
  }

  async start(): Promise<void> {
    ui.loginView.hidden = true;
    ui.consoleView.hidden = false;
    ui.session.hidden = false;
    setText(ui.userEmail, this.session.email);
    void this.showTracking();
    this.listen(ui.building, 'change', () => void this.selectBuilding(Number(ui.building.value)));
    this.listen(ui.floor, 'change', () => void this.selectFloor(Number(ui.floor.value)));
    this.listen(ui.activeOnly, 'change', () => this.inbox.setActiveOnly(ui.activeOnly.checked));
    this.listen(ui.sound, 'click', () => this.announcer.toggleSound());
    this.listen(ui.responders, 'change', () => {
      if (this.selected) void this.routeTo(this.selected);
    });
    this.listen(ui.trailMinutes, 'change', () => {
      if (this.trailDevice) void this.showTrail(this.trailDevice);
    });
    this.listen(ui.heatmap, 'change', () => void this.refreshHeat());
    this.listen(ui.reportShow, 'click', () => {
      if (this.building && ui.reportDay.value) void this.report.show(this.building, ui.reportDay.value);
    });
    ui.reportDay.value = localDay(new Date());
    this.listen(ui.bannerAck, 'click', () => this.acknowledgeShown());
    this.listen(ui.bannerAckAll, 'click', () => {
      for (const alarm of [...this.announcer.all]) this.inbox.acknowledge(alarm.id);
      ui.alarmsHeading.focus();
    });
    this.listen(ui.bannerShow, 'click', () => {
      const alarm = this.announcer.shown;
      if (!alarm) return;
      this.inbox.acknowledge(alarm.id);
      void this.showAlarm(alarm);
      this.inbox.focus(alarm.id);
    });
    const untilExpiry = this.session.expiresAt * 1000 - Date.now();
    this.expiry = window.setTimeout(
      () => this.signOut('Your session has expired: sign in again.'),
      Math.min(Math.max(untilExpiry, 0), 2 ** 31 - 1),
    );
    this.ticker = window.setInterval(() => this.tick(), 1000);

    this.viewLoading(+1);
    try {
      const [buildings, floors, users, alarms, groups] = await Promise.all([
        this.api.buildings(),
        this.api.floors(),
        this.api.userNames().catch(() => new Map<string, string>()),
        this.api.alarms(),
        this.api.groups().catch(() => []),
      ]);
      if (this.stopped) return;
      ui.responders.replaceChildren(
        h('option', { value: '' }, 'any device'),
        ...groups.map((group) => h('option', { value: group.id }, group.name)),
      );
      // Route from the organization's responders by default: "any device" may pick a visitor or a patient.
      ui.responders.value = responderGroup(groups)?.id ?? '';
      for (const building of buildings) this.buildings.set(building.id, building);
      for (const floor of floors) this.floors.set(floor.id, floor);
      this.users = users;
      this.inbox.load(alarms);
      // Resume from the newest event the list reflects: the socket replays everything after it.
      const lastSeq = alarms.reduce((max, alarm) => Math.max(max, alarm.seq), 0);
      this.live = new LiveSocket(this.session.token, lastSeq, {
        state: (state) => this.showConnection(state),
        position: (feature) => {
          this.map.update(feature);
          this.evacuation?.position(feature);
        },
        alarm: (alarm) => this.inbox.receive(alarm, true),
        unauthorized: (message) => this.signOut(`Signed out: ${message}`),
        resumed: () => {
          void this.refreshPositions();
          this.evacuation?.resumed();
        },
        ...(this.evacuation ? { evacuation: this.evacuation.receive.bind(this.evacuation) } : {}),
      });
      this.live.start();
      this.fillBuildings(buildings);
      const saved = savedView();
      const first = buildings.find((b) => b.id === saved?.building) ?? buildings[0];
      if (first) await this.selectBuilding(first.id, saved?.building === first.id ? saved.floor : undefined);
      else this.map.clear();
    } catch (error) {
      if (!this.stopped) setText(ui.inboxError, `Could not load: ${messageOf(error)}`);
    } finally {
      this.viewLoading(-1);
    }
  }

  stop(): void {
    this.stopped = true;
    this.live?.stop();
    this.announcer.stop();
    window.clearInterval(this.ticker);
    window.clearTimeout(this.expiry);
    for (const cleanup of this.cleanups.splice(0)) cleanup();
    this.map.clear();
    this.inbox.clear();
    this.report.clear();
    this.evacuation?.clear();
    setText(ui.routeSummary, '');
    setText(ui.trailSummary, '');
    ui.building.replaceChildren();
    ui.floor.replaceChildren();
    setText(ui.inboxError, '');
    ui.consoleView.hidden = true;
    ui.session.hidden = true;
    ui.tracking.hidden = true;
    ui.map.removeAttribute('aria-busy');
  }

  /**
   * Counts a load of the view in or out. The map pane is aria-busy until the restored or chosen building and
   * floor are on screen (pickers filled and set, plan drawn): what assistive technology and tests wait on.
   */
  private viewLoading(delta: 1 | -1): void {
    this.loadingView += delta;
    if (!this.stopped) ui.map.setAttribute('aria-busy', String(this.loadingView > 0));
  }

  private listen(target: EventTarget, type: string, listener: () => void): void {
    target.addEventListener(type, listener);
    this.cleanups.push(() => target.removeEventListener(type, listener));
  }

  private ticks = 0;

  private tick(): void {
    const now = Date.now();
    // Tracking windows open and close with the clock, not with a pushed position: who is tracked is asked again.
    if (++this.ticks % TRACKING_REFRESH_TICKS === 0) {
      void this.showTracking();
      void this.refreshPositions();
    }
    this.map.tick(now);
    this.inbox.tick(now);
    this.evacuation?.tick(now);
    if (this.connection.kind === 'reconnecting') this.showConnection(this.connection);
  }

  private showConnection(state: ConnectionState): void {
    this.connection = state;
    const text: Record<ConnectionState['kind'], string> = {
      connecting: 'Connecting…',
      live: 'Live',
      reconnecting:
        state.kind === 'reconnecting'
          ? `Connection lost: retrying in ${Math.max(0, Math.ceil((state.retryAt - Date.now()) / 1000))} s`
          : '',
      offline: 'Offline: waiting for the network',
      stopped: 'Signed out',
    };
    ui.connection.dataset.state = state.kind;
    setText(ui.connection, text[state.kind]);
    this.map.setLink(state.kind !== 'live' && state.kind !== 'stopped' ? (state.lostAt ?? null) : null);
    this.evacuation?.setLink(state.kind !== 'live' && state.kind !== 'stopped' ? (state.lostAt ?? null) : null);
  }

  private fillBuildings(buildings: Building[]): void {
    ui.building.replaceChildren(...buildings.map((b) => h('option', { value: b.id }, b.name)));
    ui.building.disabled = buildings.length === 0;
    if (buildings.length === 0) ui.building.append(h('option', { value: '' }, 'No buildings'));
  }

  private async detail(id: number): Promise<BuildingDetail> {
    let detail = this.details.get(id);
    if (!detail) {
      detail = await this.api.building(id);
      this.details.set(id, detail);
      for (const floor of detail.floors) this.floors.set(floor.id, { ...floor, building_id: id });
    }
    return detail;
  }

  /**
   * Shows a building and one of its floors (the given one, else level 0, else the first). The last view asked
   * for wins whatever order the answers come in: the restore after a reload, a pick in the pickers and a
   * selected alarm may all be waiting for a building's detail at once.
   */
  private async selectBuilding(id: number, floorId?: number | null): Promise<void> {
    const token = ++this.latest.view;
    this.viewLoading(+1);
    try {
      const detail = await this.detail(id);
      if (this.stopped || token !== this.latest.view) return;
      this.building = detail;
      ui.building.value = String(id);
      ui.floor.replaceChildren(...detail.floors.map((f) => h('option', { value: f.id }, f.name || `Level ${f.level}`)));
      ui.floor.disabled = detail.floors.length === 0;
      if (detail.floors.length === 0) ui.floor.append(h('option', { value: '' }, 'No floors'));
      const floor = detail.floors.find((f) => f.id === floorId) ?? detail.floors.find((f) => f.level === 0) ?? detail.floors[0] ?? null;
      this.evacuation?.show(detail);
      this.live?.watchBuilding(id);
      this.trailDevice = null;
      this.map.setTrail(null);
      setText(ui.trailSummary, '');
      await this.showFloor(floor?.id ?? null);
      await this.refreshPositions();
    } catch (error) {
      if (token === this.latest.view) setText(ui.mapSummary, `Could not load the building: ${messageOf(error)}`);
    } finally {
      this.viewLoading(-1);
    }
  }

  /** A floor of the shown building, asked for on its own: it overrides a building still loading. */
  private async selectFloor(id: number | null): Promise<void> {
    if (!this.building) return;
    ++this.latest.view;
    this.viewLoading(+1);
    try {
      await this.showFloor(id);
    } finally {
      this.viewLoading(-1);
    }
  }

  private async showFloor(id: number | null): Promise<void> {
    if (!this.building) return;
    this.floor = this.building.floors.find((f) => f.id === id) ?? null;
    ui.building.value = String(this.building.id);
    if (this.floor) ui.floor.value = String(this.floor.id);
    saveView({ building: this.building.id, floor: this.floor?.id ?? null });
    await this.map.show(this.building, this.floor);
    this.highlightSelected();
    await this.refreshHeat();
  }

  /** The heatmap overlay of the shown floor over the chosen range (off: none). */
  private async refreshHeat(): Promise<void> {
    const token = ++this.latest.heat;
    const hours = Number(ui.heatmap.value);
    if (!hours || !this.building || !this.floor) return this.map.setHeat(null);
    try {
      const heat = await floorHeat(this.api, this.building, this.floor.id, hours);
      if (token === this.latest.heat && !this.stopped) this.map.setHeat(heat);
    } catch (error) {
      if (token === this.latest.heat) setText(ui.mapSummary, `Could not load the heatmap: ${messageOf(error)}`);
    }
  }

  /** Draws where a device has been over the chosen minutes (a click on its dot, or the selected alarm's device). */
  private async showTrail(deviceId: string): Promise<void> {
    if (!this.building) return;
    const token = ++this.latest.trail;
    const minutes = Number(ui.trailMinutes.value) || 15;
    this.trailDevice = deviceId;
    setText(ui.trailSummary, `Loading the trail of ${deviceId}…`);
    try {
      const trail = await deviceTrail(this.api, this.building.id, deviceId, minutes);
      if (token !== this.latest.trail || this.stopped) return;
      this.map.setTrail(trail);
      const here = trail.points.filter((point) => point.floorId === this.floor?.id).length;
      const count = trail.points.length;
      const late =
        trail.late === 0
          ? ' None reached us late.'
          : ` ${trail.late === count ? (count === 1 ? 'It' : 'All') : trail.late} reached us late (dashed, by up to ${ago(Math.max(...trail.points.filter((point) => point.late).map((point) => point.delayMs)))}).`;
      setText(
        ui.trailSummary,
        `Trail of ${deviceId}: ${count} position${count === 1 ? '' : 's'} in the last ${minutes} min${trail.truncated ? ' (the newest)' : ''}${here !== count ? `, ${here} on this floor` : ''}.${count > 0 ? late : ''}`,
      );
    } catch (error) {
      if (token === this.latest.trail) setText(ui.trailSummary, `Could not load the trail: ${messageOf(error)}`);
    }
  }

  /** The route from the nearest responder (of the chosen group) to the selected alarm, floor by floor. */
  private async routeTo(alarm: Alarm): Promise<void> {
    const token = ++this.latest.route;
    this.map.setRoute(null);
    const building = alarm.building_id !== null ? await this.detail(alarm.building_id).catch(() => null) : null;
    if (token !== this.latest.route) return;
    if (!building?.paths?.links.length) return setText(ui.routeSummary, building ? 'No route: this building has no path graph.' : '');
    setText(ui.routeSummary, 'Finding the nearest responder…');
    try {
      const found = await responderRoute(this.api, alarm, ui.responders.value || null, (device) =>
        this.who({ ...alarm, device_id: device.device_id, user_id: device.user_id }),
      );
      if (token !== this.latest.route || this.stopped) return;
      if (!found)
        return setText(
          ui.routeSummary,
          alarm.position ? 'No responder with a live position can reach this alarm.' : 'This alarm has no position to route to.',
        );
      this.map.setRoute(found.route);
      const floors = found.floors.map((id) => this.floors.get(id)?.name || `floor ${id}`);
      setText(ui.routeSummary, `Nearest responder: ${found.route.label}${floors.length > 1 ? ` (${floors.join(' → ')})` : ''}.`);
    } catch (error) {
      if (token === this.latest.route) setText(ui.routeSummary, `No route: ${messageOf(error)}`);
    }
  }

  /** The operator's own "tracking on/off" (their tracking window, issue 32). */
  private async showTracking(): Promise<void> {
    try {
      const { tracking_window: window } = await this.api.myPrivacy();
      if (this.stopped) return;
      ui.tracking.dataset.tracked = String(window.tracked_now);
      setText(ui.tracking, window.tracked_now ? 'Tracking: on' : 'Tracking: off');
      ui.tracking.title = window.tracked_always
        ? 'Your positions are kept at all times (no tracking window)'
        : window.tracked_now
          ? 'Your positions are kept now: you are inside your tracking window'
          : 'Your positions are not kept now: you are outside your tracking window';
      ui.tracking.hidden = false;
    } catch (error) {
      console.warn('tracking state not loaded', error);
    }
  }

  private async refreshPositions(): Promise<void> {
    if (!this.building) return;
    const id = this.building.id;
    try {
      for (const feature of await this.api.livePositions(id)) this.map.update(feature);
    } catch (error) {
      console.warn('live positions not loaded', error);
    }
  }

  private selected: Alarm | null = null;

  /** Selecting an alarm brings up its building and floor and marks its device and where it was raised. */
  private async showAlarm(alarm: Alarm): Promise<void> {
    this.selected = alarm;
    this.inbox.select(alarm.id);
    const floorId = alarm.position?.floor_id ?? alarm.floor_id;
    if (alarm.building_id !== null && alarm.building_id !== this.building?.id && this.buildings.has(alarm.building_id))
      await this.selectBuilding(alarm.building_id, floorId);
    else if (floorId !== null && floorId !== this.floor?.id && this.building?.floors.some((f) => f.id === floorId))
      await this.selectFloor(floorId);
    this.highlightSelected();
    await this.routeTo(alarm);
  }

  private highlightSelected(): void {
    const alarm = this.selected;
    if (!alarm) return this.map.highlight(null, null);
    const floorId = alarm.position?.floor_id ?? alarm.floor_id;
    const here = alarm.building_id === this.building?.id && floorId === this.floor?.id;
    this.map.highlight(alarm.device_id, here ? (alarm.position?.cartesians ?? null) : null);
  }

  private acknowledgeShown(): void {
    const alarm = this.announcer.shown;
    if (!alarm) return;
    this.inbox.acknowledge(alarm.id);
    // Keep the keyboard in the banner while more wait; otherwise go to the inbox.
    if (this.announcer.all.length > 0) ui.bannerAck.focus();
    else ui.alarmsHeading.focus();
  }

  private async bulkChange(ids: string[], state: AlarmState, comment: string): Promise<string> {
    try {
      const result = await this.api.bulkChangeState(ids, state, comment);
      // The socket brings each change too; fetching them now shows them at once.
      await Promise.all(result.changed_ids.map(async (id) => this.inbox.receive(await this.api.alarm(id), false)));
      return `${state === 'CLOSED' ? 'Closed' : 'Marked false'} ${result.changed} alarm${result.changed === 1 ? '' : 's'}${result.skipped.length ? `; ${result.skipped.length} left as they were` : ''}.`;
    } catch (error) {
      throw new Error(`Not changed: ${messageOf(error)}`);
    }
  }

  private async changeState(alarm: Alarm, state: AlarmState, comment?: string): Promise<void> {
    try {
      this.inbox.receive(await this.api.changeAlarmState(alarm.id, state, comment), false);
      if (this.selected?.id === alarm.id) this.selected = this.inbox.get(alarm.id) ?? this.selected;
    } catch (error) {
      if (error instanceof ApiError && (error.status === 409 || error.status === 404)) {
        // Someone else moved it first: show where it stands now.
        this.inbox.receive(await this.api.alarm(alarm.id).catch(() => alarm), false);
      }
      throw new Error(`Not changed: ${messageOf(error)}`);
    }
  }

  private who(alarm: Alarm): string {
    const user = alarm.user_id ? (this.users.get(alarm.user_id) ?? null) : null;
    // The person first: a name may carry its own role in parentheses ("Ana (nurse)").
    if (alarm.device_id && user) return `${user} · ${alarm.device_id}`;
    return alarm.device_id ?? user ?? (alarm.user_id ? `user ${alarm.user_id.slice(0, 8)}` : 'no device');
  }

  private where(alarm: Alarm): string {
    if (alarm.building_id === null) return 'no building';
    const building = this.buildings.get(alarm.building_id)?.name ?? `building ${alarm.building_id}`;
    const floorId = alarm.position?.floor_id ?? alarm.floor_id;
    const floor = floorId !== null ? this.floors.get(floorId) : undefined;
    return floor ? `${building}, ${floor.name || `level ${floor.level}`}` : floorId !== null ? `${building}, floor ${floorId}` : building;
  }
}

/** YYYY-MM-DD of a date in the browser's time zone (the date input's format). */
function localDay(date: Date): string {
  return `${date.getFullYear()}-${String(date.getMonth() + 1).padStart(2, '0')}-${String(date.getDate()).padStart(2, '0')}`;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function savedView(): { building: number; floor: number | null } | null {
  try {
    return JSON.parse(localStorage.getItem(VIEW_KEY) ?? 'null') as { building: number; floor: number | null } | null;
  } catch {
    return null;
  }
}

function saveView(view: { building: number; floor: number | null }): void {
  try {
    localStorage.setItem(VIEW_KEY, JSON.stringify(view));
  } catch {
    // not kept: the first building shows next time
  }
}

// --- signing in and out -----------------------------------------------------------------------------------

let room: ControlRoom | null = null;

function enter(session: Session): void {
  room = new ControlRoom(session, leave);
  void room.start();
}

function leave(message?: string): void {
  room?.stop();
  room = null;
  clearSession();
  ui.connection.dataset.state = 'signed-out';
  setText(ui.connection, 'Signed out');
  ui.loginView.hidden = false;
  ui.password.value = '';
  setText(ui.loginError, message ?? '');
  ui.email.focus();
}

ui.loginForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const email = ui.email.value.trim();
  const password = ui.password.value;
  if (!email || !password) {
    setText(ui.loginError, 'Enter your e-mail and password.');
    (email ? ui.password : ui.email).focus();
    return;
  }
  ui.signIn.disabled = true;
  setText(ui.loginError, '');
  Api.signIn(email, password)
    .then(({ access_token }) => {
      const session = sessionOf(access_token);
      saveSession(session);
      ui.password.value = '';
      enter(session);
      ui.building.focus();
    })
    .catch((error: unknown) => {
      const status = error instanceof ApiError ? error.status : 0;
      setText(
        ui.loginError,
        status === 401
          ? 'Wrong e-mail or password.'
          : status === 429
            ? 'Too many attempts: wait a few minutes and try again.'
            : `Could not sign in: ${messageOf(error)}`,
      );
      ui.password.select();
    })
    .finally(() => {
      ui.signIn.disabled = false;
    });
});

ui.signOut.addEventListener('click', () => leave());

const resumed = loadSession();
if (resumed) enter(resumed);
else ui.email.focus();
