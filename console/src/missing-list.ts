import { h, setText } from './dom.js';
import { missingByFloor, type RollEntry } from './evacuation-model.js';
import { ago } from './floor-map.js';

/** A person's fix older than this reads as old (in amber): they may have lost their tag, or be somewhere it fails. */
const OLD_FIX_MS = 120_000;

/** What the list needs from the view: what a row's buttons do, and how people and places are named. */
export interface MissingListContext {
  select(entry: string): void;
  markSafe(entry: string): void;
  label(entry: RollEntry): string;
  place(entry: RollEntry): string;
  floorName(floorId: number): string;
  levelOf(floorId: number): number | undefined;
}

interface Row {
  item: HTMLLIElement;
  name: HTMLElement;
  devices: HTMLElement;
  where: HTMLElement;
  age: HTMLElement;
  mark: HTMLButtonElement;
  fixAt: number;
  /** What the row shows: entries are replaced, never changed in place, so the same object needs no redraw. */
  shown: RollEntry | null;
  ended: boolean;
}

interface FloorSection {
  section: HTMLElement;
  heading: HTMLElement;
  list: HTMLOListElement;
}

/**
 * The evacuation view's list of the missing (not found, once ended), by floor: a section per floor (lowest level
 * first), in it a row per person with their name, devices, last place, the age of that fix and a Mark safe button.
 * Each row is kept from one render to the next (only moved, added or removed), so a roll of thousands stays cheap
 * to update and a row being read or clicked does not jump.
 */
export class MissingList {
  private readonly rows = new Map<string, Row>();
  private readonly sections = new Map<string, FloorSection>();

  constructor(
    private readonly container: HTMLElement,
    private readonly context: MissingListContext,
  ) {}

  /** Shows these people (marking safe offered unless ended); answers how many. */
  render(unaccounted: readonly RollEntry[], ended: boolean, selected: string | null): number {
    const groups = missingByFloor(unaccounted, (floorId) => this.context.levelOf(floorId));
    const total = groups.reduce((sum, group) => sum + group.entries.length, 0);
    const wanted = new Set<string>();
    let previous: Element | null = null;
    const now = Date.now();
    for (const group of groups) {
      const key = String(group.floorId ?? 'none');
      wanted.add(key);
      let section = this.sections.get(key);
      if (!section) {
        const heading = h('h4', { class: 'evac-floor-heading' });
        const list = h('ol', { class: 'evac-people' });
        section = { section: h('section', { class: 'evac-floor', 'data-floor-id': key }, heading, list), heading, list };
        this.sections.set(key, section);
      }
      const where = group.floorId === null ? 'No known floor' : this.context.floorName(group.floorId);
      setText(section.heading, `${where} · ${group.entries.length}`);
      if (section.section.previousElementSibling !== previous || !section.section.isConnected) {
        if (previous) previous.after(section.section);
        else this.container.prepend(section.section);
      }
      previous = section.section;
      let cursor = section.list.firstElementChild;
      for (const entry of group.entries) {
        const row = this.row(entry, ended, selected, now);
        if (row.item === cursor) cursor = cursor.nextElementSibling;
        else section.list.insertBefore(row.item, cursor);
      }
      while (cursor) {
        const next = cursor.nextElementSibling;
        cursor.remove();
        cursor = next;
      }
    }
    for (const [key, section] of this.sections) {
      if (!wanted.has(key)) {
        section.section.remove();
        this.sections.delete(key);
      }
    }
    for (const [key, row] of this.rows) {
      if (!row.item.isConnected) this.rows.delete(key);
    }
    this.container.classList.toggle('empty', total === 0);
    this.container.dataset.count = String(total);
    return total;
  }

  /** Marks the chosen person's row and brings it into view. */
  select(key: string): void {
    for (const [rowKey, row] of this.rows) row.item.classList.toggle('selected', rowKey === key);
    this.rows.get(key)?.item.scrollIntoView({ block: 'nearest' });
  }

  /** The ages of the fixes, as time goes by. */
  tick(now: number): void {
    for (const row of this.rows.values()) this.age(row, now);
  }

  clear(): void {
    this.rows.clear();
    this.sections.clear();
    this.container.replaceChildren();
  }

  private row(entry: RollEntry, ended: boolean, selected: string | null, now: number): Row {
    let row = this.rows.get(entry.entry);
    if (!row) {
      const key = entry.entry;
      const name = h('button', { type: 'button', class: 'evac-person-name' });
      name.addEventListener('click', () => this.context.select(key));
      const mark = h('button', { type: 'button', class: 'evac-mark-safe' }, 'Mark safe');
      mark.addEventListener('click', () => this.context.markSafe(key));
      const devices = h('span', { class: 'evac-devices' });
      const where = h('span', { class: 'evac-where' });
      const age = h('span', { class: 'evac-age' });
      const item = h(
        'li',
        { class: 'evac-person', 'data-entry': key },
        h('div', { class: 'evac-person-text' }, name, devices, h('span', { class: 'evac-place' }, where, age)),
        mark,
      );
      row = { item, name, devices, where, age, mark, fixAt: Number.NaN, shown: null, ended: false };
      this.rows.set(key, row);
    }
    row.item.classList.toggle('selected', selected === entry.entry);
    if (row.shown === entry && row.ended === ended) return row;
    row.shown = entry;
    row.ended = ended;
    setText(row.name, this.context.label(entry));
    // A device nobody is assigned is named by its identifier already.
    setText(row.devices, entry.user_id ? entry.device_ids.join(', ') : entry.device_ids.slice(1).join(', '));
    setText(row.where, this.context.place(entry));
    row.fixAt = entry.last_position ? Date.parse(entry.last_position.fix_at) : Number.NaN;
    row.mark.hidden = ended;
    this.age(row, now);
    return row;
  }

  private age(row: Row, now: number): void {
    if (Number.isNaN(row.fixAt)) return setText(row.age, 'never seen');
    setText(row.age, `seen ${ago(now - row.fixAt)} ago`);
    const old = now - row.fixAt > OLD_FIX_MS;
    if (row.age.classList.contains('old') !== old) row.age.classList.toggle('old', old);
  }
}
