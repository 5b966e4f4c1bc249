import { rateLimited } from '../auth/login-throttle.js';

/** The alarm buttons a pose may carry, by the alarm type each raises. */
export type ButtonType = 'DANGER' | 'ASSISTANCE_REQUEST';

/** One device's presses of one button in one upload, folded into one raise. */
export interface FoldedPress {
  organizationId: string;
  deviceId: string;
  type: ButtonType;
  /** Presses folded in: the raise counts as that many occurrences. */
  presses: number;
}

/** Entries past which each map forgets what no longer matters (debounces run out, budgets full again). */
const BUDGET_PRUNE_AT = 10_000;

/**
 * How an alarm button's presses become alarm writes (review NH4: a held button, or a flood of invented devices,
 * turned every pose into its own alarm transaction and event). Presses are folded per device and type per
 * upload by the caller; this decides, per folded press:
 * - `raise`: an alarm event (a new alarm, or a repeat the control room is told of), counted against the
 *   credential's budget of raises per minute; an upload that would pass it is refused whole (429, nothing
 *   written: the app resends it later);
 * - `count`: a repeat within `debounceMs` of the device's last raise of that type, which only adds occurrences.
 * In memory, per gateway; times are passed in (no clock of its own).
 */
export class AlarmButton {
  /** `organization|device|type` → when its last raise was let through. */
  private readonly lastRaised = new Map<string, number>();
  /** Credential → raises left, as of `at`. */
  private readonly budgets = new Map<string, { left: number; at: number }>();

  constructor(
    private readonly debounceMs: number,
    private readonly raisesPerMinute: number,
  ) {}

  plan<P extends FoldedPress>(credential: string, presses: readonly P[], now: number): { raise: P[]; count: P[] } {
    const raise: P[] = [];
    const count: P[] = [];
    for (const press of presses) {
      const last = this.lastRaised.get(keyOf(press));
      (last !== undefined && now - last < this.debounceMs ? count : raise).push(press);
    }
    if (raise.length > 0) this.spend(credential, raise.length, now);
    for (const press of raise) this.lastRaised.set(keyOf(press), now);
    if (this.lastRaised.size > BUDGET_PRUNE_AT)
      for (const [key, at] of this.lastRaised) if (now - at >= this.debounceMs) this.lastRaised.delete(key);
    return { raise, count };
  }

  /** Takes `raises` from the credential's budget (refilled steadily, up to a minute's worth), or throws 429. */
  private spend(credential: string, raises: number, now: number): void {
    const perMs = this.raisesPerMinute / 60_000;
    const held = this.budgets.get(credential);
    const left = Math.min(this.raisesPerMinute, held ? held.left + (now - held.at) * perMs : this.raisesPerMinute);
    if (left < raises) {
      const waitMs = raises > this.raisesPerMinute ? 60_000 : (raises - left) / perMs;
      throw rateLimited(
        `Too many alarm-button raises (at most ${this.raisesPerMinute} per minute for new alarms or repeats past the debounce); nothing of this upload was stored`,
        waitMs,
      );
    }
    this.budgets.set(credential, { left: left - raises, at: now });
    if (this.budgets.size > BUDGET_PRUNE_AT)
      for (const [key, budget] of this.budgets)
        if (budget.left + (now - budget.at) * perMs >= this.raisesPerMinute) this.budgets.delete(key);
  }
}

const keyOf = (press: FoldedPress) => `${press.organizationId}|${press.deviceId}|${press.type}`;
