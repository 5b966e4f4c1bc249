/**
 * The signed-in session: the access token lives in memory and in sessionStorage (this tab only, gone when it
 * closes), so a reload of the wall screen does not sign the operator out. Never in a URL or a cookie.
 */
export interface Session {
  token: string;
  email: string;
  role: string;
  /** Seconds since the epoch, from the token. */
  expiresAt: number;
}

const KEY = 'floorcast.console.session';

function claims(token: string): Record<string, unknown> {
  const payload = token.split('.')[1] ?? '';
  const json = atob(
    payload
      .replace(/-/g, '+')
      .replace(/_/g, '/')
      .padEnd(Math.ceil(payload.length / 4) * 4, '='),
  );
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(json, (c) => c.charCodeAt(0)))) as Record<string, unknown>;
}

export function sessionOf(token: string): Session {
  const c = claims(token);
  return { token, email: String(c.email ?? ''), role: String(c.role ?? 'user'), expiresAt: Number(c.exp ?? 0) };
}

export function loadSession(): Session | null {
  try {
    const stored = sessionStorage.getItem(KEY);
    if (!stored) return null;
    const session = sessionOf(stored);
    return session.expiresAt * 1000 > Date.now() ? session : null;
  } catch {
    return null;
  }
}

export function saveSession(session: Session): void {
  try {
    sessionStorage.setItem(KEY, session.token);
  } catch {
    // Storage disabled: the session lasts as long as the page.
  }
}

export function clearSession(): void {
  try {
    sessionStorage.removeItem(KEY);
  } catch {
    // nothing stored
  }
}
