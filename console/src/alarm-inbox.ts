import { h, setText } from './dom.js';
import { ago } from './floor-map.js';
import { allowedActions, isActive, stateLabel, typeLabel, ALARM_ACTIONS, type Alarm, type AlarmState } from './model.js';

export interface InboxOptions {
  /** Admins and user managers change states; others only see. */
  canManage: boolean;
  who(alarm: Alarm): string;
  where(alarm: Alarm): string;
  select(alarm: Alarm): void;
  act(alarm: Alarm, state: AlarmState): Promise<void>;
  /** The OPEN alarms nobody has acknowledged yet, newest first (what the banner and the beep announce). */
  unacknowledged(alarms: Alarm[]): void;
}

interface Item {
  alarm: Alarm;
  li: HTMLLIElement;
  select: HTMLButtonElement;
  type: HTMLElement;
  state: HTMLElement;
  fresh: HTMLElement;
  who: HTMLElement;
  where: HTMLElement;
  time: HTMLTimeElement;
  count: HTMLElement;
  actions: Map<AlarmState, HTMLButtonElement>;
  group: HTMLElement;
  status: HTMLElement;
}

/**
 * The alarm inbox: one list item per alarm, newest first, updated in place (so focus and the operator's
 * place survive live updates). Type and state are written out as well as coloured. Only the transitions
 * the table allows are offered as buttons.
 */
export class AlarmInbox {
  private readonly items = new Map<string, Item>();
  /** OPEN alarms not yet acknowledged on this screen. */
  private readonly pending = new Set<string>();
  /** Alarms with a state change in flight (their buttons are disabled meanwhile). */
  private readonly busy = new Set<string>();
  private selected: string | null = null;
  private activeOnly = false;

  constructor(
    private readonly list: HTMLOListElement,
    private readonly heading: HTMLElement,
    private readonly options: InboxOptions,
  ) {}

  get(id: string): Alarm | undefined {
    return this.items.get(id)?.alarm;
  }

  /** The initial list (GET /api/v1/alarms): shown, not announced. */
  load(alarms: Alarm[]): void {
    for (const alarm of alarms) this.receive(alarm, false);
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
    item.alarm = alarm;
    if (alarm.state !== 'OPEN') this.pending.delete(alarm.id);
    else if (announce && (!known || repeated)) this.pending.add(alarm.id);
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
    this.selected = null;
    this.list.replaceChildren();
    this.summarise();
  }

  private create(alarm: Alarm): Item {
    const select = h('button', { type: 'button', class: 'alarm-select' });
    const type = h('span', { class: 'badge type-badge' });
    const state = h('span', { class: 'badge state-badge' });
    const fresh = h('span', { class: 'badge new-badge' }, 'NEW');
    const who = h('span', { class: 'alarm-who' });
    const where = h('span', { class: 'alarm-where' });
    const time = h('time', { class: 'alarm-time', datetime: alarm.created_at });
    const count = h('span', { class: 'alarm-count' });
    select.append(h('span', { class: 'alarm-badges' }, type, state, fresh, count), who, where, time);
    const actions = new Map<AlarmState, HTMLButtonElement>();
    const group = h('div', { class: 'alarm-actions', role: 'group' });
    for (const action of ALARM_ACTIONS) {
      const button = h('button', { type: 'button', class: `action action-${action.state.toLowerCase()}`, 'data-state': action.state }, action.label);
      button.addEventListener('click', () => void this.act(alarm.id, action.state));
      actions.set(action.state, button);
      group.append(button);
    }
    const status = h('p', { class: 'alarm-status', role: 'status' });
    const li = h('li', { class: 'alarm', 'data-alarm-id': alarm.id }, select, group, status);
    select.addEventListener('click', () => {
      const current = this.items.get(alarm.id)!.alarm;
      this.acknowledge(current.id);
      this.options.select(current);
    });
    const item: Item = { alarm, li, select, type, state, fresh, who, where, time, count, actions, group, status };
    this.items.set(alarm.id, item);
    // Newest first; existing items never move, so a focused button keeps its focus.
    const created = Date.parse(alarm.created_at);
    const before = [...this.items.values()].filter((other) => other !== item && other.li.isConnected && Date.parse(other.alarm.created_at) < created).sort((a, b) => Date.parse(b.alarm.created_at) - Date.parse(a.alarm.created_at))[0];
    this.list.insertBefore(li, before?.li ?? null);
    return item;
  }

  private render(item: Item): void {
    const { alarm } = item;
    const unacknowledged = this.pending.has(alarm.id);
    const selected = this.selected === alarm.id;
    item.li.className = `alarm type-${alarm.type.toLowerCase()} state-${alarm.state.toLowerCase()}${unacknowledged ? ' unacknowledged' : ''}${selected ? ' selected' : ''}`;
    item.li.dataset.state = alarm.state;
    item.li.hidden = this.activeOnly && !isActive(alarm.state) && !selected;
    setText(item.type, typeLabel(alarm.type));
    setText(item.state, stateLabel(alarm.state));
    item.fresh.hidden = !unacknowledged;
    setText(item.count, alarm.occurrences > 1 ? `×${alarm.occurrences}` : '');
    setText(item.who, this.options.who(alarm));
    setText(item.where, this.options.where(alarm));
    setText(item.time, timeText(alarm.created_at));
    item.select.setAttribute('aria-pressed', String(selected));
    item.select.setAttribute('aria-label', `${typeLabel(alarm.type)} alarm, ${stateLabel(alarm.state)}${unacknowledged ? ', new' : ''}: ${this.options.who(alarm)}, ${this.options.where(alarm)}, ${timeText(alarm.created_at)}. Show on map`);
    const allowed = new Set(this.options.canManage ? allowedActions(alarm.state).map((action) => action.state) : []);
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
    item.group.setAttribute('aria-label', `Actions for the ${typeLabel(alarm.type)} alarm of ${this.options.who(alarm)}`);
    if (lostFocus) item.select.focus();
  }

  private async act(id: string, state: AlarmState): Promise<void> {
    const item = this.items.get(id);
    if (!item || this.busy.has(id)) return;
    this.busy.add(id);
    this.render(item);
    setText(item.status, '');
    try {
      await this.options.act(item.alarm, state);
      this.acknowledge(id);
    } catch (error) {
      setText(item.status, error instanceof Error ? error.message : String(error));
    } finally {
      this.busy.delete(id);
      this.render(item);
      if (document.activeElement === document.body || document.activeElement === null) item.select.focus();
    }
  }

  private summarise(): void {
    const alarms = [...this.items.values()].map((item) => item.alarm);
    const open = alarms.filter((alarm) => alarm.state === 'OPEN').length;
    const active = alarms.filter((alarm) => isActive(alarm.state)).length;
    setText(this.heading, `Alarms: ${open} open, ${active} active${this.activeOnly ? '' : `, ${alarms.length} shown`}`);
    this.list.classList.toggle('empty', alarms.length === 0);
    const unacknowledged = alarms
      .filter((alarm) => this.pending.has(alarm.id))
      .sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
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
