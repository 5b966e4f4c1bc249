import { h, setText } from './dom.js';
import { ago } from './floor-map.js';
import {
  alarmSeverity,
  allowedActions,
  escalations,
  inboxOrder,
  isActive,
  needsComment,
  stateLabel,
  typeLabel,
  ALARM_ACTIONS,
  type Alarm,
  type AlarmState,
} from './model.js';

export interface InboxOptions {
  /** Admins and user managers change states; others only see. */
  canManage: boolean;
  who(alarm: Alarm): string;
  where(alarm: Alarm): string;
  select(alarm: Alarm): void;
  act(alarm: Alarm, state: AlarmState, comment?: string): Promise<void>;
  /** One state change for the picked alarms; resolves to a line saying what changed. */
  bulk(ids: string[], state: AlarmState, comment: string): Promise<string>;
  /** The OPEN alarms nobody has acknowledged yet, worst and newest first (what the banner and the beep announce). */
  unacknowledged(alarms: Alarm[]): void;
}

/** The inbox's filters and bulk bar (in the page, above the list). */
export interface InboxControls {
  type: HTMLSelectElement;
  severity: HTMLSelectElement;
  bulk: HTMLElement;
  bulkCount: HTMLElement;
  bulkComment: HTMLInputElement;
  bulkClose: HTMLButtonElement;
  bulkFalse: HTMLButtonElement;
  bulkStatus: HTMLElement;
}

interface Item {
  alarm: Alarm;
  li: HTMLLIElement;
  select: HTMLButtonElement;
  type: HTMLElement;
  severity: HTMLElement;
  state: HTMLElement;
  fresh: HTMLElement;
  escalated: HTMLElement;
  who: HTMLElement;
  zone: HTMLElement;
  /** Event time (issue 30): "Late by …" for an alarm found from fixes that arrived late, and a silence's late evidence. */
  late: HTMLElement;
  where: HTMLElement;
  pick: HTMLInputElement;
  resolve: HTMLFormElement;
  resolveLabel: HTMLElement;
  resolveComment: HTMLTextAreaElement;
  resolveSubmit: HTMLButtonElement;
  resolving: AlarmState | null;
  time: HTMLTimeElement;
  count: HTMLElement;
  actions: Map<AlarmState, HTMLButtonElement>;
  group: HTMLElement;
  status: HTMLElement;
}

/**
 * The alarm inbox: one list item per alarm, critical first, then high, then normal, newest first within (a
 * type's severity never changes, so an item never moves once placed), updated in place (so focus and the
 * operator's place survive live updates). Type, severity and state are written out as well as coloured. Only
 * the transitions the table allows are offered as buttons; closing or marking false asks for a comment first
 * (required for critical and high alarms). Picked alarms change together with one comment (the bulk bar).
 * Open critical alarms found at sign-in and every escalation are announced like new ones.
 */
export class AlarmInbox {
  private readonly items = new Map<string, Item>();
  /** OPEN alarms not yet acknowledged on this screen. */
  private readonly pending = new Set<string>();
  /** Alarms with a state change in flight (their buttons are disabled meanwhile). */
  private readonly busy = new Set<string>();
  /** Alarms picked for a bulk change. */
  private readonly picked = new Set<string>();
  private selected: string | null = null;
  private activeOnly = false;

  constructor(
    private readonly list: HTMLOListElement,
    private readonly heading: HTMLElement,
    private readonly options: InboxOptions,
    private readonly controls: InboxControls,
  ) {
    controls.type.addEventListener('change', () => this.refilter());
    controls.severity.addEventListener('change', () => this.refilter());
    controls.bulkClose.addEventListener('click', () => void this.bulk('CLOSED'));
    controls.bulkFalse.addEventListener('click', () => void this.bulk('MARKED_FALSE'));
    this.renderBulk();
  }

  get(id: string): Alarm | undefined {
    return this.items.get(id)?.alarm;
  }

  /** The initial list (GET /api/v1/alarms): shown; its OPEN critical alarms are announced (nobody may have seen them). */
  load(alarms: Alarm[]): void {
    for (const alarm of alarms) this.receive(alarm, alarm.state === 'OPEN' && alarmSeverity(alarm) === 'critical');
    this.summarise();
  }

  /**
   * An alarm from the socket (live or replayed after a reconnection) or from an action's answer. Older
   * news than what is shown is ignored. A newly raised OPEN alarm, or a repeat of one, is announced.
   */
  receive(alarm: Alarm, announce = true): void {
    const known = this.items.get(alarm.id);
    if (known && known.alarm.seq > alarm.seq) return;
    const item = known ?? this.create(alarm);
    const repeated = known !== undefined && alarm.occurrences > known.alarm.occurrences;
    // A pushed alarm carries no history: keep the known one, plus the escalation this event is.
    const history = alarm.history ?? [
      ...(known?.alarm.history ?? []),
      ...(alarm.event === 'escalated' ? [{ state: alarm.state, at: alarm.updated_at, event: 'escalated' as const, comment: null }] : []),
    ];
    item.alarm = { ...alarm, history };
    if (alarm.state !== 'OPEN') this.pending.delete(alarm.id);
    else if (announce && (!known || repeated || alarm.event === 'escalated')) this.pending.add(alarm.id);
    this.render(item);
    this.summarise();
  }

  acknowledge(id: string): void {
    if (!this.pending.delete(id)) return;
    const item = this.items.get(id);
    if (item) this.render(item);
    this.summarise();
  }

  select(id: string | null): void {
    const previous = this.selected;
    this.selected = id;
    for (const changed of [previous, id]) {
      const item = changed ? this.items.get(changed) : undefined;
      if (item) this.render(item);
    }
  }

  setActiveOnly(activeOnly: boolean): void {
    this.activeOnly = activeOnly;
    for (const item of this.items.values()) this.render(item);
    this.summarise();
  }

  focus(id: string): void {
    this.items.get(id)?.select.focus();
  }

  /** Refreshes the "n min ago" texts. */
  tick(now = Date.now()): void {
    for (const item of this.items.values()) setText(item.time, timeText(item.alarm.created_at, now));
  }

  clear(): void {
    this.items.clear();
    this.pending.clear();
    this.picked.clear();
    this.renderBulk();
    this.selected = null;
    this.list.replaceChildren();
    this.summarise();
  }

  private create(alarm: Alarm): Item {
    const select = h('button', { type: 'button', class: 'alarm-select' });
    const type = h('span', { class: 'badge type-badge' });
    const severity = h('span', { class: 'badge severity-badge' });
    const state = h('span', { class: 'badge state-badge' });
    const fresh = h('span', { class: 'badge new-badge' }, 'NEW');
    const escalated = h('span', { class: 'badge escalated-badge' });
    const who = h('span', { class: 'alarm-who' });
    const zone = h('span', { class: 'alarm-zone' });
    const late = h('span', { class: 'alarm-late' });
    const where = h('span', { class: 'alarm-where' });
    const time = h('time', { class: 'alarm-time', datetime: alarm.created_at });
    const count = h('span', { class: 'alarm-count' });
    select.append(h('span', { class: 'alarm-badges' }, severity, type, state, fresh, escalated, count), who, zone, late, where, time);
    const pick = h('input', { type: 'checkbox', class: 'alarm-pick' });
    pick.addEventListener('change', () => {
      if (pick.checked) this.picked.add(alarm.id);
      else this.picked.delete(alarm.id);
      this.renderBulk();
    });
    const actions = new Map<AlarmState, HTMLButtonElement>();
    const group = h('div', { class: 'alarm-actions', role: 'group' });
    for (const action of ALARM_ACTIONS) {
      const button = h(
        'button',
        { type: 'button', class: `action action-${action.state.toLowerCase()}`, 'data-state': action.state },
        action.label,
      );
      button.addEventListener('click', () => this.startAction(alarm.id, action.state));
      actions.set(action.state, button);
      group.append(button);
    }
    // After the actions: the keyboard reaches Confirm first, picking for a bulk change after.
    group.append(h('label', { class: 'check pick-label' }, pick, 'Pick'));
    // Closing or marking false: the comment box first.
    const resolveLabel = h('span');
    const resolveComment = h('textarea', { class: 'resolve-comment', rows: 2, maxlength: 2000 });
    const resolveSubmit = h('button', { type: 'submit', class: 'resolve-submit' });
    const cancel = h('button', { type: 'button', class: 'resolve-cancel' }, 'Cancel');
    const resolve = h(
      'form',
      { class: 'resolve' },
      h('label', { class: 'resolve-label' }, resolveLabel, resolveComment),
      h('div', { class: 'alarm-actions' }, resolveSubmit, cancel),
    );
    resolve.hidden = true;
    resolve.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.submitResolution(alarm.id);
    });
    cancel.addEventListener('click', () => this.endAction(alarm.id));
    const status = h('p', { class: 'alarm-status', role: 'status' });
    const li = h('li', { class: 'alarm', 'data-alarm-id': alarm.id }, select, group, resolve, status);
    select.addEventListener('click', () => {
      const current = this.items.get(alarm.id)!.alarm;
      this.acknowledge(current.id);
      this.options.select(current);
    });
    const item: Item = {
      alarm,
      li,
      select,
      type,
      severity,
      state,
      fresh,
      escalated,
      who,
      zone,
      late,
      where,
      pick,
      resolve,
      resolveLabel,
      resolveComment,
      resolveSubmit,
      resolving: null,
      time,
      count,
      actions,
      group,
      status,
    };
    this.items.set(alarm.id, item);
    // Worst first, newest first within; existing items never move, so a focused button keeps its focus.
    const after = [...this.items.values()]
      .filter((other) => other !== item && other.li.isConnected && inboxOrder(alarm, other.alarm) < 0)
      .sort((a, b) => inboxOrder(a.alarm, b.alarm))[0];
    this.list.insertBefore(li, after?.li ?? null);
    return item;
  }

  private render(item: Item): void {
    const { alarm } = item;
    const unacknowledged = this.pending.has(alarm.id);
    const selected = this.selected === alarm.id;
    const severity = alarmSeverity(alarm);
    const escalated = escalations(alarm);
    item.li.className = `alarm severity-${severity} type-${alarm.type.toLowerCase()} state-${alarm.state.toLowerCase()}${unacknowledged ? ' unacknowledged' : ''}${selected ? ' selected' : ''}`;
    item.li.dataset.state = alarm.state;
    item.li.dataset.severity = severity;
    item.li.dataset.type = alarm.type;
    item.li.hidden = !this.shows(alarm) && !selected;
    setText(item.type, typeLabel(alarm.type));
    setText(item.severity, severity.toUpperCase());
    setText(item.state, stateLabel(alarm.state));
    item.fresh.hidden = !unacknowledged;
    setText(item.escalated, escalated > 0 ? `ESCALATED${escalated > 1 ? ` ×${escalated}` : ''}` : '');
    item.escalated.hidden = escalated === 0 || alarm.state !== 'OPEN';
    const zone = typeof alarm.details?.geofence_name === 'string' ? alarm.details.geofence_name : '';
    setText(item.zone, zone ? `Zone: ${zone}` : '');
    item.zone.hidden = zone === '';
    const lateText = lateLine(alarm);
    setText(item.late, lateText);
    item.late.hidden = lateText === '';
    setText(item.count, alarm.occurrences > 1 ? `×${alarm.occurrences}` : '');
    setText(item.who, this.options.who(alarm));
    setText(item.where, this.options.where(alarm));
    setText(item.time, timeText(alarm.created_at));
    item.select.setAttribute('aria-pressed', String(selected));
    item.select.setAttribute(
      'aria-label',
      `${severity} ${typeLabel(alarm.type)} alarm, ${stateLabel(alarm.state)}${unacknowledged ? ', new' : ''}${escalated ? ', escalated' : ''}: ${this.options.who(alarm)}${zone ? `, zone ${zone}` : ''}${lateText ? `, ${lateText}` : ''}, ${this.options.where(alarm)}, ${timeText(alarm.created_at)}. Show on map`,
    );
    const allowed = new Set(
      this.options.canManage && item.resolving === null ? allowedActions(alarm.state).map((action) => action.state) : [],
    );
    if (!isActive(alarm.state) && this.picked.delete(alarm.id)) this.renderBulk();
    item.pick.checked = this.picked.has(alarm.id);
    (item.pick.parentElement as HTMLElement).hidden = !this.options.canManage || !isActive(alarm.state);
    item.pick.setAttribute('aria-label', `Pick the ${typeLabel(alarm.type)} alarm of ${this.options.who(alarm)}`);
    const busy = this.busy.has(alarm.id);
    let lostFocus = false;
    for (const [state, button] of item.actions) {
      const hide = !allowed.has(state);
      if (hide && document.activeElement === button) lostFocus = true;
      button.hidden = hide;
      // aria-disabled rather than disabled: a disabled button would drop the keyboard focus.
      button.setAttribute('aria-disabled', String(busy));
      button.setAttribute('aria-label', `${button.textContent} ${typeLabel(alarm.type)} alarm of ${this.options.who(alarm)}`);
    }
    item.group.hidden = allowed.size === 0;
    item.resolve.hidden = item.resolving === null;
    if (item.resolving !== null) {
      const required = needsComment(alarm, item.resolving);
      setText(
        item.resolveLabel,
        `Why ${item.resolving === 'CLOSED' ? 'close' : 'mark false'} it? ${required ? `(required for a ${severity} alarm)` : '(optional)'}`,
      );
      // aria-required, not required: the browser's own check would stop the submit before this one explains why.
      item.resolveComment.setAttribute('aria-required', String(required));
      setText(item.resolveSubmit, item.resolving === 'CLOSED' ? 'Close alarm' : 'Mark false');
      item.resolveSubmit.setAttribute('aria-disabled', String(busy));
    }
    item.group.setAttribute('aria-label', `Actions for the ${typeLabel(alarm.type)} alarm of ${this.options.who(alarm)}`);
    if (lostFocus) item.select.focus();
  }

  /** Confirm goes at once; Close and Mark false open the comment box first. */
  private startAction(id: string, state: AlarmState): void {
    const item = this.items.get(id);
    if (!item) return;
    if (state !== 'CLOSED' && state !== 'MARKED_FALSE') return void this.act(id, state);
    item.resolving = state;
    setText(item.status, '');
    this.render(item);
    item.resolveComment.focus();
  }

  private endAction(id: string): void {
    const item = this.items.get(id);
    if (!item) return;
    item.resolving = null;
    item.resolveComment.value = '';
    this.render(item);
    item.select.focus();
  }

  private async submitResolution(id: string): Promise<void> {
    const item = this.items.get(id);
    if (!item || item.resolving === null) return;
    const comment = item.resolveComment.value.trim();
    if (!comment && needsComment(item.alarm, item.resolving)) {
      setText(
        item.status,
        `A comment is required to ${item.resolving === 'CLOSED' ? 'close' : 'mark false'} a ${alarmSeverity(item.alarm)} alarm.`,
      );
      item.resolveComment.focus();
      return;
    }
    if (await this.act(id, item.resolving, comment || undefined)) this.endAction(id);
  }

  /** Resolves to whether the state changed. */
  private async act(id: string, state: AlarmState, comment?: string): Promise<boolean> {
    const item = this.items.get(id);
    if (!item || this.busy.has(id)) return false;
    this.busy.add(id);
    this.render(item);
    setText(item.status, '');
    try {
      await this.options.act(item.alarm, state, comment);
      this.acknowledge(id);
      return true;
    } catch (error) {
      setText(item.status, error instanceof Error ? error.message : String(error));
      return false;
    } finally {
      this.busy.delete(id);
      this.render(item);
      if (document.activeElement === document.body || document.activeElement === null) item.select.focus();
    }
  }

  /** Whether the filters (type, severity, active only) let an alarm show. */
  private shows(alarm: Alarm): boolean {
    const { type, severity } = this.controls;
    return (
      (!this.activeOnly || isActive(alarm.state)) &&
      (!type.value || alarm.type === type.value) &&
      (!severity.value || alarmSeverity(alarm) === severity.value)
    );
  }

  private refilter(): void {
    for (const item of this.items.values()) this.render(item);
    this.summarise();
  }

  private renderBulk(): void {
    const { bulk, bulkCount } = this.controls;
    bulk.hidden = this.picked.size === 0;
    setText(bulkCount, `${this.picked.size} picked`);
  }

  private async bulk(state: AlarmState): Promise<void> {
    const { bulkComment, bulkStatus, bulkClose, bulkFalse } = this.controls;
    const ids = [...this.picked];
    const comment = bulkComment.value.trim();
    if (ids.length === 0) return;
    if (!comment) {
      setText(bulkStatus, 'Write one comment for all of them: why they are closed or false.');
      bulkComment.focus();
      return;
    }
    for (const button of [bulkClose, bulkFalse]) button.setAttribute('aria-disabled', 'true');
    try {
      setText(bulkStatus, await this.options.bulk(ids, state, comment));
      this.picked.clear();
      bulkComment.value = '';
      for (const item of this.items.values()) this.render(item);
      this.renderBulk();
    } catch (error) {
      setText(bulkStatus, error instanceof Error ? error.message : String(error));
    } finally {
      for (const button of [bulkClose, bulkFalse]) button.setAttribute('aria-disabled', 'false');
    }
  }

  private summarise(): void {
    const alarms = [...this.items.values()].map((item) => item.alarm);
    const open = alarms.filter((alarm) => alarm.state === 'OPEN').length;
    const active = alarms.filter((alarm) => isActive(alarm.state)).length;
    const shown = alarms.filter((alarm) => this.shows(alarm)).length;
    setText(this.heading, `Alarms: ${open} open, ${active} active, ${shown} shown`);
    this.list.classList.toggle('empty', shown === 0);
    const unacknowledged = alarms.filter((alarm) => this.pending.has(alarm.id)).sort(inboxOrder);
    this.options.unacknowledged(unacknowledged);
  }
}

function timeText(iso: string, now = Date.now()): string {
  const date = new Date(iso);
  const today = new Date(now).toDateString() === date.toDateString();
  const clock = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  const day = today ? '' : `${date.toLocaleDateString([], { day: 'numeric', month: 'short' })} `;
  return `${day}${clock} (${ago(now - date.getTime())} ago)`;
}

/**
 * What event time adds to an alarm's line: an alarm found from fixes (or a press) that reached us late says by how
 * much and when it happened; a silence DEADMAN whose device's buffer came in says what it shows.
 */
export function lateLine(alarm: Alarm, now = Date.now()): string {
  const evidence = alarm.silence_evidence;
  if (evidence) {
    const fixes = `${evidence.count} fix${evidence.count === 1 ? '' : 'es'}`;
    const moved = evidence.moved_m !== null ? `, ${Math.round(evidence.moved_m)} m` : '';
    return `Reported late: was ${evidence.was_moving ? 'moving' : 'still'} (${fixes}${moved})`;
  }
  if (!alarm.late || !alarm.occurred_at) return '';
  const delay =
    typeof alarm.details?.delay_ms === 'number' ? alarm.details.delay_ms : Date.parse(alarm.created_at) - Date.parse(alarm.occurred_at);
  return `Late by ${ago(delay)}: happened ${timeText(alarm.occurred_at, now)}`;
}
