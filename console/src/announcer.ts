import { setText } from './dom.js';
import type { Alarm } from './model.js';

const BEEP_EVERY_MS = 2500;
const TITLE = 'Floorcast control room';

/**
 * Announces unacknowledged OPEN alarms: a banner (role="alert") with the worst and newest one (saying so when it
 * escalated: nobody confirmed it in time) and buttons to show or acknowledge it, the page title, and, once the
 * operator has switched sound on (a click, which browsers require before audio), a short beep every few seconds
 * until everything is acknowledged, and at once for a new alarm on top or an escalation.
 */
export class Announcer {
  private audio: AudioContext | null = null;
  private soundOn = false;
  private pending: Alarm[] = [];
  private beepTimer: number | undefined;

  constructor(
    private readonly elements: { banner: HTMLElement; text: HTMLElement; more: HTMLElement; soundButton: HTMLButtonElement },
    private readonly describe: (alarm: Alarm) => string,
  ) {
    this.renderSound();
  }

  /** The alarm the banner shows (the newest unacknowledged one). */
  get shown(): Alarm | undefined {
    return this.pending[0];
  }

  get all(): readonly Alarm[] {
    return this.pending;
  }

  update(pending: Alarm[]): void {
    const wasQuiet = this.pending.length === 0;
    const top = this.pending[0] && `${this.pending[0].id}:${this.pending[0].seq}`;
    this.pending = pending;
    const { banner, text, more } = this.elements;
    banner.hidden = pending.length === 0;
    document.title = pending.length > 0 ? `(${pending.length}) NEW ALARM · ${TITLE}` : TITLE;
    if (pending.length === 0) {
      window.clearInterval(this.beepTimer);
      this.beepTimer = undefined;
      return;
    }
    const first = pending[0]!;
    const escalated = first.event === 'escalated' || (first.history ?? []).some((entry) => entry.event === 'escalated');
    text.parentElement?.classList.toggle('escalated', escalated);
    setText(text, `${escalated ? 'ESCALATED, not confirmed' : 'New alarm'}: ${this.describe(first)}`);
    setText(more, pending.length > 1 ? `and ${pending.length - 1} more unacknowledged` : '');
    // A new alarm on top, or the same one escalated again (a new seq), beeps at once.
    if (wasQuiet || `${first.id}:${first.seq}` !== top) this.beep();
    if (this.beepTimer === undefined) this.beepTimer = window.setInterval(() => this.beep(), BEEP_EVERY_MS);
  }

  /** Switches sound on or off; switching on happens in a click, so the browser lets audio start. */
  toggleSound(): void {
    this.soundOn = !this.soundOn;
    if (this.soundOn) {
      try {
        this.audio ??= new AudioContext();
        void this.audio.resume();
        this.tone(660, 0, 0.08); // a short confirmation that sound works
      } catch {
        this.soundOn = false;
      }
    }
    this.renderSound();
  }

  stop(): void {
    this.update([]);
    void this.audio?.close();
    this.audio = null;
    this.soundOn = false;
    this.renderSound();
  }

  private renderSound(): void {
    const button = this.elements.soundButton;
    button.setAttribute('aria-pressed', String(this.soundOn));
    setText(button, this.soundOn ? 'Sound: on' : 'Sound: off');
  }

  private beep(): void {
    if (!this.soundOn || !this.audio || this.pending.length === 0) return;
    this.tone(880, 0, 0.15);
    this.tone(880, 0.25, 0.15);
  }

  private tone(frequency: number, delay: number, duration: number): void {
    const audio = this.audio;
    if (!audio) return;
    const start = audio.currentTime + delay;
    const oscillator = audio.createOscillator();
    const gain = audio.createGain();
    oscillator.type = 'square';
    oscillator.frequency.value = frequency;
    gain.gain.setValueAtTime(0.0001, start);
    gain.gain.exponentialRampToValueAtTime(0.2, start + 0.01);
    gain.gain.exponentialRampToValueAtTime(0.0001, start + duration);
    oscillator.connect(gain).connect(audio.destination);
    oscillator.start(start);
    oscillator.stop(start + duration + 0.02);
  }
}
