import type { Api } from './api.js';
import { h, setText } from './dom.js';
import {
  MusterRoll,
  clock,
  personLabel,
  type AssemblyPoint,
  type EvacuationChange,
  type EvacuationDetail,
  type RollEntry,
} from './evacuation-model.js';
import { ago } from './floor-map.js';
import { MissingList } from './missing-list.js';
import type { BuildingDetail, Floor, PositionFeature, Route } from './model.js';
import { MusterMaps } from './muster-map.js';
import { walkTime } from './walk-time.js';

/** The counts are read out to screen readers at most this often (and at once when everyone is accounted for). */
const COUNTS_SPOKEN_EVERY_MS = 20_000;
/** The plans are redrawn at most this often; the list and the counts at every change. */
const MAPS_EVERY_MS = 500;
const RECENT = 6;

export interface EvacuationViewOptions {
  api: () => Api;
  userName: (userId: string) => string | null;
}

/**
 * The incident commander's evacuation view of the shown building (admins and user managers): counts, the missing
 * by floor with their last place and the age of that fix, the plans with the missing on each floor, the assembly
 * points' counts, one-click "mark safe" with a comment, and declaring and ending. It follows the building's
 * `buildings/{id}/evacuation` topic (the socket replays the roll, then each change) and the live positions;
 * `GET .../evacuations/{id}` fills in the newest fixes of the missing when an evacuation comes into view.
 */
export class EvacuationView {
  private building: BuildingDetail | null = null;
  private points: AssemblyPoint[] = [];
  private roll: MusterRoll | null = null;
  private selected: string | null = null;
  private route: Route | null = null;
  private flushTimer: number | undefined;
  private mapsDrawnAt = 0;
  private mapsTimer: number | undefined;
  private spoken = { at: 0, text: '' };
  private token = 0;
  private readonly maps: MusterMaps;
  private readonly list: MissingList;
  private readonly ui = {
    idle: h('div', { class: 'evac-idle' }),
    idleText: h('span', { class: 'evac-idle-text' }),
    board: h('div', { class: 'evac-board', hidden: true }),
    kind: h('p', { class: 'evac-kind' }),
    title: h('h2', { id: 'evacuation-heading', tabindex: -1 }),
    meta: h('p', { class: 'evac-meta' }),
    linkLost: h('p', { class: 'evac-link-lost', role: 'status', hidden: true }),
    wall: h('button', { type: 'button', class: 'evac-wall', 'aria-pressed': 'false' }, 'Wall screen'),
    end: h('button', { type: 'button', class: 'evac-end' }, 'End evacuation'),
    dismiss: h('button', { type: 'button', class: 'evac-dismiss', hidden: true }, 'Close'),
    onRoll: h('strong', { class: 'evac-figure' }),
    safe: h('strong', { class: 'evac-figure' }),
    missing: h('strong', { class: 'evac-figure' }),
    missingLabel: h('span', { class: 'evac-tile-label' }, 'Missing'),
    elapsed: h('strong', { class: 'evac-figure' }),
    elapsedLabel: h('span', { class: 'evac-tile-label' }, 'Since start'),
    others: h('p', { class: 'evac-others' }),
    progress: h('progress', { class: 'evac-progress', 'aria-label': 'Accounted for', max: 100, value: 0 }),
    pointList: h('ul', { class: 'evac-points', 'aria-label': 'Assembly points' }),
    missingHeading: h('h3', { id: 'evac-missing-heading' }),
    missingList: h('div', { class: 'evac-missing', role: 'region', 'aria-labelledby': 'evac-missing-heading', tabindex: 0 }),
    maps: h('div', { class: 'evac-maps' }),
    routeStatus: h('p', { class: 'evac-route', role: 'status' }),
    recent: h('ol', { class: 'evac-recent', 'aria-label': 'Just accounted for' }),
    status: h('p', { class: 'evac-status', role: 'status' }),
    spoken: h('p', { class: 'visually-hidden', role: 'status', 'aria-live': 'polite' }),
    alert: h('p', { class: 'visually-hidden', role: 'alert' }),
    dialog: h('dialog', { class: 'evac-dialog', 'aria-labelledby': 'evac-dialog-title' }),
  };

  constructor(
    private readonly root: HTMLElement,
    private readonly options: EvacuationViewOptions,
  ) {
    const ui = this.ui;
    this.maps = new MusterMaps(ui.maps, options.api, (entry) => void this.select(entry));
    this.list = new MissingList(ui.missingList, {
      select: (entry) => void this.select(entry),
      markSafe: (entry) => void this.markSafe(entry),
      label: (entry) => this.label(entry),
      place: (entry) => this.place(entry),
      floorName: (floorId) => this.floorName(floorId),
      levelOf: (floorId) => this.floor(floorId)?.level,
    });
    const drill = h('button', { type: 'button', class: 'evac-start-drill' }, 'Start a drill');
    const declare = h('button', { type: 'button', class: 'evac-declare' }, 'Declare evacuation');
    drill.addEventListener('click', () => void this.declare(true));
    declare.addEventListener('click', () => void this.declare(false));
    ui.idle.append(h('h2', {}, 'Evacuation'), ui.idleText, h('span', { class: 'evac-idle-actions' }, drill, declare));
    ui.end.addEventListener('click', () => void this.end());
    ui.dismiss.addEventListener('click', () => this.showIdle());
    ui.wall.addEventListener('click', () => this.setWall(ui.wall.getAttribute('aria-pressed') !== 'true'));
    const tile = (figure: HTMLElement, label: HTMLElement | string, kind: string) =>
      h(
        'div',
        { class: `evac-tile evac-tile-${kind}` },
        typeof label === 'string' ? h('span', { class: 'evac-tile-label' }, label) : label,
        figure,
      );
    ui.board.append(
      h(
        'header',
        { class: 'evac-head' },
        h('div', { class: 'evac-head-text' }, ui.kind, ui.title, ui.meta),
        h('div', { class: 'evac-head-actions' }, ui.wall, ui.end, ui.dismiss),
      ),
      ui.linkLost,
      h(
        'div',
        { class: 'evac-counts' },
        tile(ui.onRoll, 'On roll', 'roll'),
        tile(ui.safe, 'Safe', 'safe'),
        tile(ui.missing, ui.missingLabel, 'missing'),
        tile(ui.elapsed, ui.elapsedLabel, 'elapsed'),
      ),
      ui.progress,
      ui.others,
      h(
        'section',
        { class: 'evac-points-pane', 'aria-labelledby': 'evac-points-heading' },
        h('h3', { id: 'evac-points-heading' }, 'Assembly points'),
        ui.pointList,
      ),
      ui.status,
      h(
        'div',
        { class: 'evac-body' },
        h('section', { class: 'evac-missing-pane', 'aria-labelledby': 'evac-missing-heading' }, ui.missingHeading, ui.missingList),
        h(
          'section',
          { class: 'evac-maps-pane', 'aria-labelledby': 'evac-maps-heading' },
          h('h3', { id: 'evac-maps-heading' }, 'Last seen, floor by floor'),
          ui.maps,
          ui.routeStatus,
        ),
      ),
      h(
        'section',
        { class: 'evac-recent-pane', 'aria-labelledby': 'evac-recent-heading' },
        h('h3', { id: 'evac-recent-heading' }, 'Just accounted for'),
        ui.recent,
      ),
    );
    root.replaceChildren(ui.idle, ui.board, ui.spoken, ui.alert, ui.dialog);
    root.dataset.state = 'idle';
    // A wall screen opens the console at /console#evacuation: the view alone, full width.
    if (location.hash === '#evacuation') this.setWall(true);
  }

  /** The shown building changed: its active evacuation, if any, comes with the socket's replay of the building's topic. */
  show(building: BuildingDetail): void {
    if (this.building?.id === building.id) return;
    this.building = building;
    this.points = (building.geofences as AssemblyPoint[]).filter((fence) => fence.muster_point === true);
    this.maps.setBuilding(building, this.points);
    this.root.hidden = false;
    this.showIdle();
  }

  /** A frame of the building's topic (replayed or live). */
  receive(change: EvacuationChange, replayed: boolean): void {
    if (!this.building || change.building_id !== this.building.id) return;
    if (change.kind === 'started' && change.evacuation) {
      if (this.roll?.evacuation.id === change.evacuation.id) return;
      this.start(change.evacuation);
      if (!replayed) this.say(`${change.evacuation.drill ? 'Drill started' : 'Evacuation declared'}: ${this.building.name}`, true);
      // The roll with the newest fix of each missing person (the replay brings the entries as stored; a live start none).
      const token = this.token;
      void this.options
        .api()
        .evacuation(change.building_id, change.evacuation.id)
        .then((detail) => token === this.token && this.load(detail))
        .catch((error: unknown) => console.warn('evacuation roll not loaded', error));
      return;
    }
    if (!this.roll || change.evacuation_id !== this.roll.evacuation.id) return;
    if (change.kind === 'entry' && change.entry) {
      if (this.roll.apply(change.entry)) this.changed();
    } else if (change.kind === 'ended' && change.evacuation) {
      this.roll.evacuation = change.evacuation;
      this.changed();
      this.say(`${change.evacuation.drill ? 'Drill' : 'Evacuation'} ended: ${this.roll.counts().not_found} not found`, true);
    }
  }

  /** A live position: a missing person's last known place moves with it. */
  position(feature: PositionFeature): void {
    const { properties } = feature;
    if (!this.roll || !this.building || properties.building_id !== this.building.id || !properties.local_coordinates) return;
    const [x, y] = properties.local_coordinates;
    const moved = this.roll.position(properties.device_id, {
      floor_id: properties.floor_id,
      x,
      y,
      lat: 0,
      lng: 0,
      fix_at: properties.time,
    });
    if (moved && moved.status === 'missing') this.changed();
  }

  /** Back after a drop: the socket replays the changes, but an evacuation ended meanwhile is asked for. */
  resumed(): void {
    const roll = this.roll;
    if (!roll?.evacuation.active || !this.building) return;
    const token = this.token;
    void this.options
      .api()
      .evacuation(this.building.id, roll.evacuation.id)
      .then((detail) => token === this.token && this.load(detail))
      .catch((error: unknown) => console.warn('evacuation not refreshed', error));
  }

  tick(now = Date.now()): void {
    const roll = this.roll;
    if (!roll) return;
    const { started_at, ended_at } = roll.evacuation;
    setText(this.ui.elapsed, clock((ended_at ? Date.parse(ended_at) : now) - Date.parse(started_at)));
    this.list.tick(now);
    if (this.root.dataset.link === 'lost') this.setLink(Number(this.root.dataset.lostAt), now);
  }

  /** The live link is down since `lostAt` (null: live): the figures dim and say how old they are. */
  setLink(lostAt: number | null, now = Date.now()): void {
    this.root.dataset.link = lostAt === null ? 'live' : 'lost';
    this.root.dataset.lostAt = lostAt === null ? '' : String(lostAt);
    this.ui.linkLost.hidden = lostAt === null;
    if (lostAt !== null) setText(this.ui.linkLost, `Connection lost · figures from ${ago(now - lostAt)} ago`);
  }

  clear(): void {
    ++this.token;
    window.clearTimeout(this.flushTimer);
    window.clearTimeout(this.mapsTimer);
    this.flushTimer = this.mapsTimer = undefined;
    this.building = null;
    this.roll = null;
    this.maps.clear();
    this.resetBoard();
    this.setWall(false);
    if (this.ui.dialog.open) this.ui.dialog.close();
    this.root.hidden = true;
  }

  private showIdle(): void {
    ++this.token;
    this.roll = null;
    this.resetBoard();
    this.root.dataset.state = 'idle';
    this.root.dataset.drill = 'false';
    this.ui.idle.hidden = false;
    this.ui.board.hidden = true;
    setText(this.ui.idleText, `No evacuation in progress in ${this.building?.name ?? 'this building'}.`);
  }

  private resetBoard(): void {
    this.list.clear();
    this.ui.recent.replaceChildren();
    this.selected = null;
    this.route = null;
    setText(this.ui.routeStatus, '');
    setText(this.ui.status, '');
  }

  private start(evacuation: EvacuationDetail | MusterRoll['evacuation']): void {
    this.showIdle();
    this.roll = new MusterRoll(evacuation);
    this.ui.idle.hidden = true;
    this.ui.board.hidden = false;
    this.changed();
  }

  /** A fetched evacuation: its summary and roll, merged by seq with what the socket brought. */
  private load(detail: EvacuationDetail): void {
    if (!this.roll || this.roll.evacuation.id !== detail.id) this.start(detail);
    const roll = this.roll!;
    const { missing, roll: entries, arrivals, ...summary } = detail;
    roll.evacuation = summary;
    // The missing come last: they carry the newest fix of each person (live or stored).
    for (const entry of [...entries, ...arrivals, ...missing]) roll.apply(entry);
    this.changed();
  }

  /** Something changed: the board is brought up to date once for a burst of frames. */
  private changed(): void {
    if (this.flushTimer !== undefined) return;
    this.flushTimer = window.setTimeout(() => {
      this.flushTimer = undefined;
      this.render();
    }, 50);
  }

  private render(now = Date.now()): void {
    const roll = this.roll;
    const building = this.building;
    if (!roll || !building) return;
    const ui = this.ui;
    const { evacuation } = roll;
    const counts = roll.counts();
    const ended = !evacuation.active;
    this.root.dataset.state = ended ? 'ended' : 'active';
    this.root.dataset.drill = String(evacuation.drill);
    setText(ui.kind, `${evacuation.drill ? 'DRILL · practice' : 'EVACUATION'}${ended ? ' · ended' : ''}`);
    setText(ui.title, `${evacuation.drill ? 'Drill' : 'Evacuation'} of ${building.name}`);
    const time = (iso: string) => new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
    setText(
      ui.meta,
      [
        `Started ${time(evacuation.started_at)} by ${evacuation.started_by.email}`,
        evacuation.ended_at ? `ended ${time(evacuation.ended_at)} by ${evacuation.ended_by?.email ?? 'the system'}` : null,
        evacuation.floor_ids ? `floors ${evacuation.floor_ids.map((id) => this.floorName(id)).join(', ')}` : null,
        evacuation.note,
      ]
        .filter(Boolean)
        .join(' · '),
    );
    ui.end.hidden = ended;
    setText(ui.end, evacuation.drill ? 'End drill' : 'End evacuation');
    ui.dismiss.hidden = !ended;
    setText(ui.onRoll, String(counts.on_roll));
    setText(ui.safe, String(counts.safe));
    setText(ui.missing, String(ended ? counts.not_found : counts.missing));
    setText(ui.missingLabel, ended ? 'Not found' : 'Missing');
    setText(ui.elapsedLabel, ended ? 'Took' : 'Since start');
    const accounted =
      counts.on_roll === 0 ? 100 : Math.round(((counts.on_roll - counts.missing - counts.not_found) / counts.on_roll) * 100);
    ui.progress.value = accounted;
    setText(
      ui.others,
      `${accounted}% accounted for · ${counts.safe_manual} marked safe by hand · ${counts.left_site} had left the site · ${counts.arrivals} came in since (responders)`,
    );
    this.renderPoints(roll);
    const total = this.list.render(roll.unaccounted(), !evacuation.active, this.selected);
    setText(ui.missingHeading, ended ? `Not found (${total})` : `Missing (${total})`);
    this.renderRecent(roll);
    this.tick(now);
    if (now - this.mapsDrawnAt >= MAPS_EVERY_MS) this.drawMaps();
    else if (this.mapsTimer === undefined)
      this.mapsTimer = window.setTimeout(() => {
        this.mapsTimer = undefined;
        this.drawMaps();
      }, MAPS_EVERY_MS);
    this.speak(counts.missing, counts.on_roll, counts.safe, now);
  }

  private renderPoints(roll: MusterRoll): void {
    const counts = roll.pointCounts();
    const items = this.points.map((point) =>
      h(
        'li',
        { class: 'evac-point', 'data-point-id': point.id },
        h('span', { class: 'evac-point-name' }, point.name),
        h('strong', { class: 'evac-point-count' }, counts.get(point.id) ?? 0),
      ),
    );
    if (items.length === 0)
      items.push(h('li', { class: 'evac-point none' }, 'This building has no assembly point: people are only marked safe by hand.'));
    const text = items.map((item) => item.textContent).join('|');
    if (this.ui.pointList.dataset.text !== text) {
      this.ui.pointList.replaceChildren(...items);
      this.ui.pointList.dataset.text = text;
    }
  }

  private renderRecent(roll: MusterRoll): void {
    const items = roll.recentlyAccounted(RECENT).map((entry) => {
      const how =
        entry.status === 'safe'
          ? `at ${entry.assembly_point?.name ?? 'an assembly point'}`
          : `marked by ${entry.marked_by?.email ?? 'a warden'}${entry.comment ? `: “${entry.comment}”` : ''}`;
      const time = new Date(entry.status_at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
      return h('li', { 'data-entry': entry.entry }, h('strong', {}, this.label(entry)), ` ${how} · ${time}`);
    });
    const text = items.map((item) => item.textContent).join('|');
    if (this.ui.recent.dataset.text !== text) {
      this.ui.recent.replaceChildren(...items);
      this.ui.recent.dataset.text = text;
    }
  }

  private drawMaps(): void {
    const roll = this.roll;
    if (!roll) return;
    this.mapsDrawnAt = Date.now();
    const missing = new Map<number, RollEntry[]>();
    for (const entry of roll.unaccounted()) {
      const floorId = entry.last_position?.floor_id;
      if (floorId == null) continue;
      const list = missing.get(floorId);
      if (list) list.push(entry);
      else missing.set(floorId, [entry]);
    }
    this.maps.draw(
      { missing, pointCounts: roll.pointCounts(), selected: this.selected, route: this.route, label: (entry) => this.label(entry) },
      (floor) => floor.name || `Level ${floor.level}`,
    );
  }

  /** Counts for screen readers, now and then (a polite region): never once per person. */
  private speak(missing: number, onRoll: number, safe: number, now: number): void {
    const text = missing === 0 ? `Everyone on the roll is accounted for: ${onRoll}.` : `${safe} of ${onRoll} safe, ${missing} missing.`;
    if (text === this.spoken.text || (missing > 0 && now - this.spoken.at < COUNTS_SPOKEN_EVERY_MS)) return;
    this.spoken = { at: now, text };
    setText(this.ui.spoken, text);
  }

  private say(text: string, alert: boolean): void {
    setText(alert ? this.ui.alert : this.ui.status, text);
  }

  /** A missing person chosen in the list or on a plan: ringed on their floor, with the rescuers' route to them. */
  private async select(key: string): Promise<void> {
    const roll = this.roll;
    const building = this.building;
    if (!roll || !building) return;
    this.selected = key;
    this.route = null;
    this.list.select(key);
    this.drawMaps();
    const entry = roll.get(key);
    if (!entry) return;
    setText(this.ui.routeStatus, `Finding the route to ${this.label(entry)}…`);
    try {
      const found = await this.options.api().rescueRoute(building.id, roll.evacuation.id, key);
      if (this.selected !== key || this.roll !== roll) return;
      this.route = found.route;
      const floors = [...new Set(found.route.legs.map((leg) => this.floorName(leg.floor_id)))];
      setText(
        this.ui.routeStatus,
        `Route to ${this.label(entry)} from ${found.assembly_point.name}: ${Math.round(found.route.distance_m)} m, ${walkTime(found.route.duration_s)}${floors.length > 1 ? ` (${floors.join(' → ')})` : ''}.`,
      );
      this.drawMaps();
    } catch (error) {
      if (this.selected === key) setText(this.ui.routeStatus, `No route to ${this.label(entry)}: ${messageOf(error)}`);
    }
  }

  private async markSafe(key: string): Promise<void> {
    const roll = this.roll;
    const building = this.building;
    const entry = roll?.get(key);
    if (!roll || !building || !entry) return;
    const comment = await this.ask({
      title: `Mark ${this.label(entry)} safe`,
      text: 'Seen by a warden: they will be listed as marked by you, with your comment.',
      input: 'Comment (where, who saw them)',
      confirm: 'Mark safe',
    });
    if (comment === null) return;
    try {
      const marked = await this.options.api().markSafe(building.id, roll.evacuation.id, key, comment);
      if (this.roll !== roll) return;
      roll.apply(marked);
      this.say(`${this.label(entry)} marked safe.`, false);
      this.changed();
    } catch (error) {
      this.say(`${this.label(entry)} not marked: ${messageOf(error)}`, false);
    }
  }

  private async declare(drill: boolean): Promise<void> {
    const building = this.building;
    if (!building) return;
    const note = await this.ask(
      drill
        ? {
            title: `Start a drill in ${building.name}?`,
            text: 'Everyone in the building goes on the roll, marked as a practice.',
            input: 'Note (optional)',
            confirm: 'Start the drill',
          }
        : {
            title: `Declare an evacuation of ${building.name}?`,
            text: 'Everyone in the building goes on the roll, and the site is alerted (evacuation webhooks).',
            input: 'Note (optional)',
            confirm: 'Declare evacuation',
            danger: true,
          },
    );
    if (note === null || this.building !== building) return;
    try {
      this.load(await this.options.api().declareEvacuation(building.id, { drill, ...(note ? { note } : {}) }));
      this.ui.title.focus();
    } catch (error) {
      setText(this.ui.idleText, `Not declared: ${messageOf(error)}`);
    }
  }

  private async end(): Promise<void> {
    const roll = this.roll;
    const building = this.building;
    if (!roll || !building) return;
    const missing = roll.counts().missing;
    const what = roll.evacuation.drill ? 'drill' : 'evacuation';
    const answer = await this.ask({
      title: `End the ${what}?`,
      text: missing > 0 ? `${missing} still missing will be recorded as not found.` : 'Everyone on the roll is accounted for.',
      confirm: `End the ${what}`,
      danger: missing > 0,
    });
    if (answer === null) return;
    try {
      this.load(await this.options.api().endEvacuation(building.id, roll.evacuation.id));
    } catch (error) {
      this.say(`Not ended: ${messageOf(error)}`, false);
    }
  }

  /** A modal question: resolves with the text typed (empty without an input), or null when cancelled. */
  private ask(question: { title: string; text: string; input?: string; confirm: string; danger?: boolean }): Promise<string | null> {
    const dialog = this.ui.dialog as HTMLDialogElement;
    const input = question.input
      ? h('input', { type: 'text', class: 'evac-dialog-input', maxlength: 2000, 'aria-label': question.input })
      : null;
    const confirm = h(
      'button',
      { type: 'submit', value: 'confirm', class: `evac-confirm${question.danger ? ' danger' : ''}` },
      question.confirm,
    );
    const cancel = h('button', { type: 'button', class: 'evac-cancel' }, 'Cancel');
    const form = h(
      'form',
      { method: 'dialog' },
      h('h2', { id: 'evac-dialog-title' }, question.title),
      h('p', {}, question.text),
      input ? h('label', { class: 'evac-dialog-label' }, question.input!, input) : null,
      h('div', { class: 'evac-dialog-actions' }, confirm, cancel),
    );
    dialog.replaceChildren(form);
    return new Promise((resolve) => {
      let answer: string | null = null;
      form.addEventListener('submit', () => {
        answer = input?.value.trim() ?? '';
      });
      cancel.addEventListener('click', () => dialog.close());
      dialog.addEventListener('close', () => resolve(answer), { once: true });
      if (dialog.open) dialog.close();
      dialog.showModal();
      (input ?? confirm).focus();
    });
  }

  private setWall(on: boolean): void {
    document.body.classList.toggle('evacuation-focus', on);
    this.ui.wall.setAttribute('aria-pressed', String(on));
    setText(this.ui.wall, on ? 'Leave wall screen' : 'Wall screen');
  }

  private label(entry: RollEntry): string {
    return personLabel(entry, this.options.userName);
  }

  private floor(floorId: number): Floor | undefined {
    return this.building?.floors.find((floor) => floor.id === floorId);
  }

  private floorName(floorId: number): string {
    const floor = this.floor(floorId);
    return floor ? floor.name || `Level ${floor.level}` : `floor ${floorId}`;
  }

  /** A person's last place in words: the zone it lies in (a room, a ward), else coordinates on the floor. */
  private place(entry: RollEntry): string {
    const fix = entry.last_position;
    if (!fix) return 'no known place';
    if (fix.floor_id === null || fix.x === null || fix.y === null) return 'outdoors (no floor)';
    const zone = this.building?.geofences.find(
      (fence) => fence.floor_id === fix.floor_id && fence.type === 'POLYGON' && inside(fix.x!, fix.y!, fence.cartesians),
    );
    return `${zone ? `${zone.name}, ` : ''}x ${fix.x.toFixed(0)} m, y ${fix.y.toFixed(0)} m`;
  }
}

function inside(x: number, y: number, ring: [number, number][]): boolean {
  let result = false;
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
    const [xi, yi] = ring[i]!;
    const [xj, yj] = ring[j]!;
    if (yi > y !== yj > y && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) result = !result;
  }
  return result;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
