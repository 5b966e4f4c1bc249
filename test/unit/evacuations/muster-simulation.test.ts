import { describe, expect, it } from 'vitest';
import { CLEARANCE_M, DEFAULT_MUSTER_SIM, MusterSimulation, insideBy } from '../../../testkit/muster-simulation.js';

const walk = (seed: number) => {
  const sim = new MusterSimulation({ ...DEFAULT_MUSTER_SIM, seed });
  const ticks = [...sim.ticks()];
  return { sim, ticks };
};

describe('the mustering simulation (testkit)', () => {
  it('walks the same way for the same seed, and another way for another', () => {
    expect(walk(31).ticks).toEqual(walk(31).ticks);
    expect(walk(32).ticks).not.toEqual(walk(31).ticks);
  });

  it('brings every walker into a point once, keeps the stayers out (one per floor), and never puts a pose on an edge', () => {
    const { sim, ticks } = walk(31);
    expect(sim.stayers.map((person) => person.floor).sort()).toEqual([0, 1, 2]);
    expect(new Set(sim.arrivals.keys())).toEqual(new Set(sim.walkers.map((person) => person.device)));
    expect(new Set([...sim.arrivals.values()].map((arrival) => arrival.point))).toEqual(new Set(['Car park A', 'Lawn B']));
    const stayers = new Set(sim.stayers.map((person) => person.device));
    for (const pose of ticks.flat()) {
      for (const point of sim.options.points) {
        const depth = insideBy(point, pose.x, pose.y);
        if (pose.floor === 0) expect(Math.abs(depth)).toBeGreaterThanOrEqual(CLEARANCE_M);
        if (stayers.has(pose.device)) expect(depth).toBeLessThan(0);
      }
      // A pose inside a point is at or after its person's arrival there.
      const inside = sim.options.points.find((point) => pose.floor === 0 && insideBy(point, pose.x, pose.y) > 0);
      if (inside) expect(sim.arrivals.get(pose.device)).toMatchObject({ point: inside.name, offsetMs: expect.any(Number) });
      if (inside) expect(pose.offsetMs).toBeGreaterThanOrEqual(sim.arrivals.get(pose.device)!.offsetMs);
    }
    // Different speeds: arrivals spread over the walk, not one tick.
    expect(new Set([...sim.arrivals.values()].map((arrival) => arrival.offsetMs)).size).toBeGreaterThan(20);
  });

  it('figures: 50/90/100% as the k-th accounted of the roll, with a warden mark counted at its time', () => {
    const { sim } = walk(31);
    const offsets = [...sim.arrivals.values()].map((arrival) => arrival.offsetMs).sort((a, b) => a - b);
    const figures = sim.figures();
    expect(figures).toMatchObject({ onRoll: 200, accounted: 197 });
    expect(figures.milestones).toEqual({ 50: offsets[99]! / 1000, 90: offsets[179]! / 1000, 100: null });
    const marked = sim.figures([{ device: sim.stayers[0]!.device, offsetMs: 0 }]);
    expect(marked.milestones[90]).toBe(offsets[178]! / 1000);
  });
});
