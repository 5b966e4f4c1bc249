/** A label's box in the map's user units (x, y: top-left corner). */
export interface LabelBox {
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface LabelCandidate {
  id: string;
  /** Higher goes first: the selected alarm's device, then people, then zone names, then other devices. */
  priority: number;
  /** Where the label may go, best first (e.g. right of its dot, then left). */
  options: LabelBox[];
}

export const intersects = (a: LabelBox, b: LabelBox): boolean =>
  a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

/**
 * Greedy placement: by priority (ties keep the given order), each label takes its first option that meets no
 * label already placed; a label none of whose options fits is hidden. Returns the chosen option's index per
 * shown label (absent: hidden). Pure, so a unit test can place crowded labels without a browser.
 */
export function placeLabels(candidates: readonly LabelCandidate[]): Map<string, number> {
  const order = candidates
    .map((candidate, index) => ({ candidate, index }))
    .sort((a, b) => b.candidate.priority - a.candidate.priority || a.index - b.index);
  const placed: LabelBox[] = [];
  const chosen = new Map<string, number>();
  for (const { candidate } of order) {
    const option = candidate.options.findIndex((box) => !placed.some((other) => intersects(box, other)));
    if (option < 0) continue;
    placed.push(candidate.options[option]!);
    chosen.set(candidate.id, option);
  }
  return chosen;
}
