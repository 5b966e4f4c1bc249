import { describe, expect, it } from 'vitest';
import { AlarmButton, type FoldedPress } from '../../../gateway/alarms/alarm-button.js';
import { AppError, ErrorCode } from '../../../shared/errors.js';

const press = (deviceId: string, type: FoldedPress['type'] = 'DANGER', organizationId = 'org'): FoldedPress => ({
  organizationId,
  deviceId,
  type,
  presses: 1,
});
const T0 = 1_000_000;

describe('AlarmButton', () => {
  it('lets a press raise, then only counts repeats of that device and type until the debounce runs out', () => {
    const button = new AlarmButton(10_000, 100);
    expect(button.plan('user:a', [press('phone')], T0)).toEqual({ raise: [press('phone')], count: [] });
    expect(button.plan('user:a', [press('phone')], T0 + 9_999)).toEqual({ raise: [], count: [press('phone')] });
    // Another type, device or organization is its own button.
    expect(
      button.plan('user:a', [press('phone', 'ASSISTANCE_REQUEST'), press('tablet'), press('phone', 'DANGER', 'other')], T0 + 5000).count,
    ).toEqual([]);
    expect(button.plan('user:a', [press('phone')], T0 + 10_000)).toEqual({ raise: [press('phone')], count: [] });
    // The window starts again at each raise, not at each repeat.
    expect(button.plan('user:a', [press('phone')], T0 + 19_999).count).toHaveLength(1);
  });

  it('refuses a plan past the credential budget whole (429 with a wait), and refills it steadily', () => {
    const button = new AlarmButton(60_000, 6); // one raise per 10 s
    button.plan('key:k', [press('a'), press('b'), press('c')], T0);
    button.plan('key:k', [press('d'), press('e'), press('f')], T0);
    let refused: unknown;
    try {
      button.plan('key:k', [press('g')], T0 + 1000);
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).code).toBe(ErrorCode.RateLimited);
    expect(Number((refused as AppError).headers?.['retry-after'])).toBe(9);
    // Nothing of the refused plan took effect: 'g' is not debounced.
    expect(button.plan('key:k', [press('g')], T0 + 10_001).raise).toEqual([press('g')]);
    // Repeats cost nothing; other credentials have their own budget.
    expect(button.plan('key:k', [press('a'), press('b')], T0 + 10_002).count).toHaveLength(2);
    expect(button.plan('user:u', [press('h'), press('i')], T0 + 10_002).raise).toHaveLength(2);
  });

  it('never lets one upload raise more than a full budget', () => {
    const button = new AlarmButton(10_000, 3);
    expect(() =>
      button.plan(
        'user:a',
        ['a', 'b', 'c', 'd'].map((device) => press(device)),
        T0,
      ),
    ).toThrowError(/at most 3 per minute/);
    expect(
      button.plan(
        'user:a',
        ['a', 'b', 'c'].map((device) => press(device)),
        T0,
      ).raise,
    ).toHaveLength(3);
  });
});
