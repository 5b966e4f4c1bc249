import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../shared/logger.js';
import { FAULT_EXIT_CODE, ProcessGuard, boundedStep, stopOnSignals, verdictOf } from '../../shared/process-guard.js';

/** A logger that keeps its lines, and a fake process: the guard's decisions are tested without exiting. */
function setup(flushTimeoutMs = 1000) {
  const lines: { level: string; fields: Record<string, unknown>; message: string }[] = [];
  const record = (level: string) => (fields: Record<string, unknown>, message: string) => void lines.push({ level, fields, message });
  const logger = { error: record('error'), fatal: record('fatal') } as unknown as Logger;
  const target = new EventEmitter();
  const exits: number[] = [];
  const guard = ProcessGuard.install({ logger, target, flushTimeoutMs, exit: (code) => void exits.push(code) });
  return { guard, target, lines, exits };
}

describe('the process guard', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('survives an unhandled rejection, logging and counting it', () => {
    const { guard, target, lines, exits } = setup();
    const error = new RangeError('Maximum call stack size exceeded');
    target.emit('unhandledRejection', error, Promise.resolve());
    target.emit('unhandledRejection', 'a string reason', Promise.resolve());
    expect(guard.counts).toEqual({ unhandledRejection: 2, uncaughtException: 0 });
    expect(exits).toEqual([]);
    expect(lines.map((line) => [line.level, line.fields.fault, line.fields.count, line.fields.verdict])).toEqual([
      ['error', 'unhandledRejection', 1, 'survive'],
      ['error', 'unhandledRejection', 2, 'survive'],
    ]);
    expect(lines[0]!.fields.err).toBe(error);
  });

  it('treats an uncaught exception, or an error marked fatal, as unsurvivable', () => {
    expect(verdictOf('uncaughtException', new Error('x'))).toBe('exit');
    expect(verdictOf('unhandledRejection', Object.assign(new Error('x'), { fatal: true }))).toBe('exit');
    expect(verdictOf('unhandledRejection', new Error('x'))).toBe('survive');
    expect(verdictOf('unhandledRejection', undefined)).toBe('survive');
  });

  it('flushes, then exits non-zero, on an uncaught exception', async () => {
    const { guard, target, lines, exits } = setup();
    const steps: string[] = [];
    guard.flushWith(async () => {
      steps.push('flushing');
      await Promise.resolve();
      steps.push('flushed');
    });
    target.emit('uncaughtException', new Error('state may be corrupt'));
    expect(exits).toEqual([]); // not before the flush
    await vi.waitFor(() => expect(exits).toEqual([FAULT_EXIT_CODE]));
    expect(steps).toEqual(['flushing', 'flushed']);
    expect(guard.counts.uncaughtException).toBe(1);
    expect(lines.find((line) => line.level === 'fatal')?.fields).toMatchObject({ fault: 'uncaughtException', verdict: 'exit' });
  });

  it('exits even when the flush fails or hangs', async () => {
    const failing = setup();
    failing.guard.flushWith(() => Promise.reject(new Error('storage gone')));
    failing.target.emit('uncaughtException', new Error('boom'));
    await vi.waitFor(() => expect(failing.exits).toEqual([FAULT_EXIT_CODE]));
    expect(failing.lines.some((line) => line.message === 'flush before exit failed')).toBe(true);

    vi.useFakeTimers();
    const hanging = setup(5000);
    hanging.guard.flushWith(() => new Promise(() => undefined));
    hanging.target.emit('uncaughtException', new Error('boom'));
    await vi.advanceTimersByTimeAsync(4999);
    expect(hanging.exits).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(hanging.exits).toEqual([FAULT_EXIT_CODE]);
  });

  it('exits at once on a second fatal fault during the flush', () => {
    const { guard, target, exits } = setup();
    guard.flushWith(() => new Promise(() => undefined));
    target.emit('uncaughtException', new Error('first'));
    target.emit('uncaughtException', new Error('second, from the flush'));
    expect(exits).toEqual([FAULT_EXIT_CODE]);
    expect(guard.counts.uncaughtException).toBe(2);
  });

  it('can be uninstalled', () => {
    const { guard, target } = setup();
    guard.uninstall();
    expect(target.listenerCount('unhandledRejection')).toBe(0);
    expect(target.listenerCount('uncaughtException')).toBe(0);
  });
});

describe('the graceful stop on signals', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function setupStop(close: () => Promise<void>, deadlineMs = 15_000) {
    const lines: { level: string; message: string }[] = [];
    const record = (level: string) => (_fields: unknown, message: string) => void lines.push({ level, message });
    const logger = { info: record('info'), warn: record('warn'), error: record('error') } as unknown as Logger;
    const target = new EventEmitter();
    const exits: number[] = [];
    const stopping = stopOnSignals(logger, 'the test process', close, { deadlineMs, target, exit: (code) => void exits.push(code) });
    return { target, exits, lines, stopping };
  }

  it('closes once on SIGTERM and exits 0', async () => {
    let closes = 0;
    const { target, exits, stopping } = setupStop(async () => void closes++);
    expect(stopping()).toBe(false);
    target.emit('SIGTERM');
    expect(stopping()).toBe(true);
    await vi.waitFor(() => expect(exits).toEqual([0]));
    expect(closes).toBe(1);
  });

  it('exits 1 at the deadline when the close waits on a server that went away', async () => {
    vi.useFakeTimers();
    const { target, exits, lines } = setupStop(() => new Promise<void>(() => undefined), 15_000); // never settles
    target.emit('SIGTERM');
    await vi.advanceTimersByTimeAsync(14_999);
    expect(exits).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(exits).toEqual([1]);
    expect(lines.some((line) => line.level === 'error' && line.message.includes('did not stop within 15000 ms'))).toBe(true);
  });

  it('exits 1 at once on a second signal', () => {
    const { target, exits } = setupStop(() => new Promise<void>(() => undefined));
    target.emit('SIGTERM');
    expect(exits).toEqual([]);
    target.emit('SIGINT');
    expect(exits).toEqual([1]);
  });

  it('bounds one step of a stop, and the steps after it still run', async () => {
    vi.useFakeTimers();
    const lines: string[] = [];
    const logger = { warn: (_fields: unknown, message: string) => void lines.push(message) } as unknown as Logger;
    const ran: string[] = [];
    const stop = (async () => {
      await boundedStep(logger, 'bus.close', () => new Promise(() => undefined), 2000);
      await boundedStep(logger, 'storage.close', async () => void ran.push('storage.close'), 2000);
      await boundedStep(logger, 'failing', async () => Promise.reject(new Error('gone')), 2000);
    })();
    await vi.advanceTimersByTimeAsync(2000);
    await stop;
    expect(ran).toEqual(['storage.close']);
    expect(lines).toEqual(['stop: bus.close did not finish within 2000 ms; going on without it', 'stop: failing failed; going on']);
  });
});
