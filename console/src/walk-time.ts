/**
 * A route's time as it comes (the routing API's `duration_s`: walking speed, stairs, lifts and their wait):
 * "45 s", "2 min 10 s", "3 min", "1 h 5 min". Never rounded up to "about 1 min": 10 s and 59 s differ to
 * someone running to an alarm.
 */
export function walkTime(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const minutes = Math.floor(s / 60);
  if (minutes < 60) return s % 60 === 0 ? `${minutes} min` : `${minutes} min ${s % 60} s`;
  const rest = minutes % 60;
  return rest === 0 ? `${Math.floor(minutes / 60)} h` : `${Math.floor(minutes / 60)} h ${rest} min`;
}

/** The group the console routes from by default: the organization's responders, when it has such a group. */
export function responderGroup<G extends { id: string; name: string }>(groups: readonly G[]): G | undefined {
  return (
    groups.find((group) => /^(first[ -])?responders?$/i.test(group.name.trim())) ?? groups.find((group) => /respon(d|se)/i.test(group.name))
  );
}
