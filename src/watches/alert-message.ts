/**
 * The words of a watch alert (issue 29 item 1), the same on every channel (e-mail, a
 * Slack-compatible incoming webhook, the signed alert webhook): one alert per change of a watch's
 * state (an outage starts, it ends, tronwatch paused the watch), or, when several changes of one
 * watch waited for the pace (a flapping endpoint), one summary that lists each of them.
 *
 * Host only: an alert names the watch's receiver by its host (and port), never its full URL, path
 * or query, which often carry a token (`https://shop.example/hook?token=…`). The only link in an
 * alert is the console's own page of the watch ({@link watchLink}), which carries no query
 * other than the environment's (`?env=test`).
 *
 * Test mode (issue 32): an alert about a test-mode watch or endpoint (network `nile`, `tw_test_`
 * keys) goes to the same targets as a live one (a team tries its alerting with test mode, as
 * Stripe sends test-mode webhooks and e-mails, marked), but it is marked everywhere, so an
 * on-call engineer never takes it for a live outage: the subject starts with `[TEST MODE] `,
 * the text's first line says so, the signed alert webhook's body says `livemode: false` and
 * `environment: "test"`, and the console link opens the console in test mode.
 */
import { isLivemode, LIVE_NETWORK } from '../common/environment.js';

/** The kinds of watch_alerts rows (migration 043). */
export type AlertKind = 'failing' | 'recovered' | 'auto_paused';

/** One change of a watch's state, as queued by src/watches/health.ts. */
export interface AlertChange {
  /** watch_alerts.id (`alr_…`). */
  id: string;
  kind: AlertKind;
  /** The sentence health.ts wrote (no URL in it). */
  message: string;
  /** When the change happened (watch_alerts.created_at). */
  at: Date;
}

/** The watch an alert is about. */
export interface AlertWatch {
  id: string;
  address: string;
  label: string | null;
  /** The watch's webhook URL (only its host is ever shown); null for a chat watch. */
  webhook_url: string | null;
  /**
   * Set when the alert is about an endpoint (issue 30, migration 092) rather than one watch:
   * then `id` is the endpoint's, `address` is empty, `webhook_url` is the endpoint's URL, and
   * `watch_count` its live watches (one alert for all of them).
   */
  endpoint?: { id: string; label: string | null; watch_count: number } | null;
  /**
   * The watch's (or endpoint's) network, its environment (issue 32): `mainnet` live, `nile`
   * test. Absent: live.
   */
  network?: string;
}

/** One composed alert: what every channel sends, in its own format. */
export interface AlertText {
  /** One line: an e-mail's subject, a chat message's first line. */
  subject: string;
  /** Plain text, several lines, ending with the console link. */
  text: string;
  /** The watch's state after the last change: what an on-call tool acts on. */
  state: 'failing' | 'recovered' | 'paused';
  /** Outages that started among the changes (kind 'failing'). */
  outages: number;
  /** The receiver's host (`shop.example`, `shop.example:8443`), or null for a chat watch. */
  host: string | null;
  /** The console page of the watch (with `?env=test` for a test-mode watch). */
  link: string;
  /** False for a test-mode watch's or endpoint's alert (issue 32): marked as such. */
  livemode: boolean;
}

/** What starts a test-mode alert's subject (issue 32). */
export const TEST_MODE_SUBJECT = '[TEST MODE] ';

/** The first line of a test-mode alert's text (issue 32). */
export const TEST_MODE_LINE =
  'TEST MODE: this alert is about a test-mode object (Nile, tw_test_ keys), not a live one: no real deposit is affected.';

const SUBJECTS: Record<AlertKind, string> = {
  failing: 'Deliveries to your webhook are failing',
  recovered: 'Deliveries to your webhook recovered',
  auto_paused: 'Your watch was paused: its deliveries kept failing',
};

const STATE: Record<AlertKind, AlertText['state']> = {
  failing: 'failing',
  recovered: 'recovered',
  auto_paused: 'paused',
};

/**
 * The host (and port, when not the scheme's default) of a webhook URL: all an alert may show of
 * it. @returns null for null; `(invalid URL)` for a string the URL parser refuses (never the
 * string itself, which could hold a token).
 */
export function receiverHost(url: string | null): string | null {
  if (url === null) return null;
  try {
    return new URL(url).host;
  } catch {
    return '(invalid URL)';
  }
}

/**
 * The query that opens a console page in an environment (issue 32; src/console/static.ts sets the
 * console's environment switch from it): `?env=test` for a test-mode object, none for a live one.
 */
function envQuery(livemode: boolean): string {
  return livemode ? '' : '?env=test';
}

/**
 * The console's page of a watch: `${consoleUrl}/console/watches/${id}`, plus `?env=test` for a
 * test-mode watch (issue 32: its page exists in test mode only). No token.
 */
export function watchLink(consoleUrl: string, watchId: string, livemode = true): string {
  return `${consoleUrl.replace(/\/+$/, '')}/console/watches/${encodeURIComponent(watchId)}${envQuery(livemode)}`;
}

/**
 * The console's page of an endpoint (issue 40 item 1): `${consoleUrl}/console/endpoints/${id}`
 * (an endpoint's alert), plus `?env=test` for a test-mode endpoint. No token.
 */
export function endpointLink(consoleUrl: string, endpointId: string, livemode = true): string {
  return `${consoleUrl.replace(/\/+$/, '')}/console/endpoints/${encodeURIComponent(endpointId)}${envQuery(livemode)}`;
}

const ENDPOINT_SUBJECTS: Record<AlertKind, string> = {
  failing: 'Deliveries to your endpoint are failing',
  recovered: 'Deliveries to your endpoint recovered',
  auto_paused: 'Your endpoint was switched off: its deliveries kept failing',
};

/** `2026-11-28 02:40:05 UTC`: an alert's times, to the second, in UTC. */
export function alertTime(d: Date): string {
  return `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/**
 * Compose the alert for `changes` of one watch (oldest first, at least one).
 * @param paceMinutes the pace (WATCH_ALERT_PACE_MINUTES), named in a summary's explanation.
 * @throws RangeError when `changes` is empty.
 */
export function composeAlert(
  watch: AlertWatch,
  changes: readonly AlertChange[],
  consoleUrl: string,
  paceMinutes: number,
): AlertText {
  const first = changes[0];
  const last = changes[changes.length - 1];
  if (!first || !last) throw new RangeError('an alert needs at least one change');
  const host = receiverHost(watch.webhook_url);
  const ep = watch.endpoint ?? null;
  const livemode = isLivemode(watch.network ?? LIVE_NETWORK);
  const link = ep
    ? endpointLink(consoleUrl, ep.id, livemode)
    : watchLink(consoleUrl, watch.id, livemode);
  // A test-mode alert (issue 32) says so first, in the subject and the text.
  const mark = livemode ? '' : TEST_MODE_SUBJECT;
  const banner = livemode ? [] : [TEST_MODE_LINE, ''];
  const name = watch.label ? `${watch.label} (${watch.address})` : watch.address;
  // An endpoint's alert speaks for all its watches (one message, not one per deposit address).
  const head = ep
    ? [
        `Endpoint: ${host ?? 'Telegram'}`,
        `Endpoint id: ${ep.label ? `${ep.label} (${ep.id})` : ep.id}`,
        `Watches on it: ${ep.watch_count.toLocaleString('en')}`,
        '',
      ]
    : [`Watch: ${name}`, `Endpoint: ${host ?? 'Telegram'}`, ''];
  const outages = changes.filter((c) => c.kind === 'failing').length;
  const state = STATE[last.kind];
  if (changes.length === 1) {
    return {
      subject: mark + (ep ? ENDPOINT_SUBJECTS : SUBJECTS)[first.kind],
      text: [...banner, ...head, first.message, `At: ${alertTime(first.at)}`, '', link].join('\n'),
      state,
      outages,
      host,
      link,
      livemode,
    };
  }
  const now = { failing: 'failing', recovered: 'delivering again', paused: 'paused' }[state];
  return {
    subject: `${mark}Deliveries to your ${ep ? 'endpoint' : 'webhook'} are flapping: ${outages} ${outages === 1 ? 'outage' : 'outages'} since ${alertTime(first.at)}, now ${now}`,
    text: [
      ...banner,
      ...head,
      `The endpoint changed state ${changes.length} times since ${alertTime(first.at)} (${outages} ${outages === 1 ? 'outage' : 'outages'}). tronwatch sends at most one alert per ${ep ? 'endpoint' : 'watch'} and channel every ${paceMinutes} minutes and sums up the changes in between:`,
      ...changes.map((c) => `- ${alertTime(c.at)}  ${c.message}`),
      '',
      `Now: ${now}.`,
      '',
      link,
    ].join('\n'),
    state,
    outages,
    host,
    link,
    livemode,
  };
}
