/**
 * Live pages (issue 19 item 6): one EventSource on /console/api/live for the whole app
 * (src/console/routes/live.ts), shared by the pages that follow deliveries. Each message names
 * the events whose delivery moved and whether new events arrived.
 *
 * Fallback: when the browser has no EventSource, or the stream is refused or cannot be kept open
 * (EventSource then gives up: readyState CLOSED), every subscriber is called with `null` every
 * POLL_MS while the page is visible ("something may have changed: load again"), and the stream
 * is tried again after RETRY_MS. While the browser reconnects by itself (CONNECTING) it is waited for.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { API } from './api';

/** A change of the account's events (src/console/live.ts LiveChange); null when polling. */
export interface LiveChange {
  event_ids: string[];
  new_events: boolean;
}

export type LiveMode = 'connecting' | 'live' | 'polling';

type Sub = (c: LiveChange | null) => void;

export const POLL_MS = 5000;
/** sessionStorage key of the reason the server ended the stream (read once after the reload). */
const STREAM_END_KEY = 'tw_stream_end';

const END_TEXT: Record<string, string> = {
  removed: 'You were removed from this account: your sessions ended.',
  signed_out: 'This session was signed out (here or from another device).',
  expired: 'Your session expired: sign in again.',
  role_changed: 'Your role in this account changed: the console now shows what it allows.',
  two_factor_required: 'This account now requires a second factor: set one up to continue.',
};

/**
 * Why the server ended the live stream before this page load, in words, once (then forgotten),
 * or null.
 */
export function takeStreamEndNotice(): string | null {
  try {
    const r = sessionStorage.getItem(STREAM_END_KEY);
    if (r === null) return null;
    sessionStorage.removeItem(STREAM_END_KEY);
    return END_TEXT[r] ?? 'The console was signed out by the server.';
  } catch {
    return null;
  }
}
const RETRY_MS = 30_000;

const subs = new Set<Sub>();
const modeSubs = new Set<(m: LiveMode) => void>();
let source: EventSource | null = null;
let poller: ReturnType<typeof setInterval> | undefined;
let retry: ReturnType<typeof setTimeout> | undefined;
let mode: LiveMode = 'connecting';
/** Whether the current subscribers' stream was open before (a reopening reloads once). */
let wasOpen = false;

function setMode(m: LiveMode): void {
  mode = m;
  for (const fn of modeSubs) fn(m);
}

function emit(c: LiveChange | null): void {
  for (const fn of subs) fn(c);
}

function startPolling(): void {
  setMode('polling');
  if (poller === undefined) {
    poller = setInterval(() => {
      if (document.visibilityState === 'visible') emit(null);
    }, POLL_MS);
  }
  if (retry === undefined && typeof EventSource !== 'undefined') {
    retry = setTimeout(() => {
      retry = undefined;
      if (subs.size > 0) open();
    }, RETRY_MS);
  }
}

function stopPolling(): void {
  if (poller !== undefined) clearInterval(poller);
  poller = undefined;
}

function open(): void {
  if (typeof EventSource === 'undefined') {
    startPolling();
    return;
  }
  source?.close();
  const es = new EventSource(`${API}/live`, { withCredentials: true });
  source = es;
  es.onopen = () => {
    stopPolling();
    setMode('live');
    // Whatever happened while the stream was down: load again once.
    if (wasOpen) emit(null);
    wasOpen = true;
  };
  es.addEventListener('change', (e) => {
    try {
      emit(JSON.parse((e as MessageEvent<string>).data) as LiveChange);
    } catch {
      emit(null);
    }
  });
  // The server ended the stream because of its session (issue 27 item 5): removed, signed out,
  // expired, a new role. The page loads again after saying why (app.tsx shows streamEndNotice).
  es.addEventListener('end', (e) => {
    es.close();
    if (source === es) source = null;
    let reason = '';
    try {
      reason = String(
        (JSON.parse((e as MessageEvent<string>).data) as { reason?: unknown }).reason,
      );
    } catch {
      reason = '';
    }
    try {
      sessionStorage.setItem(STREAM_END_KEY, reason);
    } catch {
      // storage off: the page still loads again
    }
    location.reload();
  });
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED) {
      if (source === es) source = null;
      startPolling();
    }
  };
}

function close(): void {
  source?.close();
  source = null;
  stopPolling();
  if (retry !== undefined) clearTimeout(retry);
  retry = undefined;
  wasOpen = false;
  setMode('connecting');
}

/**
 * Call `fn` with each change of the account's events while the component is mounted (`null`:
 * something may have changed). Returns the mode, for the page to say whether it is live.
 */
export function useLive(fn: Sub): LiveMode {
  const saved = useRef(fn);
  saved.current = fn;
  const [m, setM] = useState<LiveMode>(mode);
  useEffect(() => {
    const sub: Sub = (c) => saved.current(c);
    subs.add(sub);
    modeSubs.add(setM);
    setM(mode);
    if (subs.size === 1) open();
    return () => {
      subs.delete(sub);
      modeSubs.delete(setM);
      if (subs.size === 0) close();
    };
  }, []);
  return m;
}
