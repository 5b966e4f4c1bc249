import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { intersects, placeLabels, type LabelBox, type LabelCandidate } from '../../../console/src/map-labels.js';

/** A device label as the map lays it out: right of its dot, else left of it; 12 units high, 7 per character. */
const deviceLabel = (id: string, x: number, y: number, text: string, priority = 0): LabelCandidate => {
  const width = text.length * 7;
  return {
    id,
    priority,
    options: [
      { x: x + 4, y: y - 6, width, height: 12 },
      { x: x - 4 - width, y: y - 6, width, height: 12 },
    ],
  };
};
const shownBoxes = (candidates: LabelCandidate[], placed: Map<string, number>): LabelBox[] =>
  candidates.filter((c) => placed.has(c.id)).map((c) => c.options[placed.get(c.id)!]!);

describe('map label placement', () => {
  it('hides labels of devices crowded in a corridor so that no two shown labels meet', () => {
    const crowd = Array.from({ length: 10 }, (_, i) =>
      deviceLabel(`demo-${i}`, 400 + (i % 5) * 12, 320 + Math.floor(i / 5) * 6, `demo-${i}`),
    );
    const placed = placeLabels(crowd);
    const boxes = shownBoxes(crowd, placed);
    expect(boxes.length).toBeGreaterThan(0);
    expect(boxes.length).toBeLessThan(crowd.length);
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) expect(intersects(boxes[i]!, boxes[j]!)).toBe(false);
  });

  it('places people and the alarm first: a plain device gives way to them, whatever the order given', () => {
    const plain = deviceLabel('walker', 100, 100, 'demo-15');
    const person = deviceLabel('nurse', 102, 101, 'Ana (nurse) · demo-03', 2);
    const alarm = deviceLabel('alarm', 101, 99, 'demo-47', 3);
    const placed = placeLabels([plain, person, alarm]);
    expect(placed.has('alarm')).toBe(true);
    expect(placed.get('alarm')).toBe(0); // its preferred side
    expect(placed.has('nurse')).toBe(true);
    expect(placed.get('nurse')).toBe(1); // the right side was taken: it went left
    expect(placed.has('walker')).toBe(false);
  });

  it('keeps a label that meets nothing, on its preferred side', () => {
    const placed = placeLabels([deviceLabel('a', 0, 0, 'alone'), deviceLabel('b', 500, 500, 'far away')]);
    expect([...placed]).toEqual([
      ['a', 0],
      ['b', 0],
    ]);
  });

  it('for any scatter of labels, shown boxes never meet and every hidden label had no free option', () => {
    const scatter = fc.array(
      fc.record({
        x: fc.integer({ min: 0, max: 300 }),
        y: fc.integer({ min: 0, max: 200 }),
        chars: fc.integer({ min: 3, max: 20 }),
        priority: fc.integer({ min: 0, max: 3 }),
      }),
      { maxLength: 40 },
    );
    fc.assert(
      fc.property(scatter, (points) => {
        const candidates = points.map((p, i) => deviceLabel(`d${i}`, p.x, p.y, 'x'.repeat(p.chars), p.priority));
        const placed = placeLabels(candidates);
        const boxes = shownBoxes(candidates, placed);
        for (let i = 0; i < boxes.length; i++)
          for (let j = i + 1; j < boxes.length; j++) if (intersects(boxes[i]!, boxes[j]!)) return false;
        // Greedy is maximal: a hidden label meets a shown one on every side it could take.
        return candidates
          .filter((c) => !placed.has(c.id))
          .every((c) => c.options.every((option) => boxes.some((box) => intersects(option, box))));
      }),
      { seed: 27, numRuns: 300 },
    );
  });
});
