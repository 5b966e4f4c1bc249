import { describe, expect, it } from 'vitest';
import { responderGroup, walkTime } from '../../../console/src/walk-time.js';

describe('route times in the console', () => {
  it('says seconds and minutes as they come, not "about 1 min"', () => {
    expect(walkTime(0)).toBe('0 s');
    expect(walkTime(8.4)).toBe('8 s');
    expect(walkTime(45)).toBe('45 s');
    expect(walkTime(59.4)).toBe('59 s');
    expect(walkTime(60)).toBe('1 min');
    expect(walkTime(130)).toBe('2 min 10 s');
    expect(walkTime(3599)).toBe('59 min 59 s');
    expect(walkTime(3600)).toBe('1 h');
    expect(walkTime(3900)).toBe('1 h 5 min');
    expect(walkTime(-3)).toBe('0 s');
  });
});

describe('the default responders group', () => {
  const group = (id: string, name: string) => ({ id, name });
  it("is the organization's responders group when there is one", () => {
    expect(responderGroup([group('a', 'Cleaners'), group('b', 'Responders')])?.id).toBe('b');
    expect(responderGroup([group('a', 'Night responder team'), group('b', 'First responders')])?.id).toBe('b');
    expect(responderGroup([group('a', 'Visitors'), group('b', 'Rapid response team')])?.id).toBe('b');
  });
  it('is none (any device) when there is no such group', () => {
    expect(responderGroup([group('a', 'Cleaners'), group('b', 'Visitors')])).toBeUndefined();
    expect(responderGroup([])).toBeUndefined();
  });
});
