/**
 * One event: its fields, the exact payload bytes, every notification and every attempt.
 * Redelivering needs the developer role (src/console/routes/events.ts); below it the page is the
 * same without the button.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, describeError, get, post } from '../api';
import {
  CodeBlock,
  HeaderList,
  Loading,
  Mono,
  Notice,
  Pill,
  StatusPill,
  Time,
} from '../components/ui';
import { durationMs, heldWords, indentJson, tronscanTx } from '../format';
import { useLoad } from '../hooks';
import { useLive } from '../live';
import { RoleNote, useRole } from '../roles';
import { BASE, Link } from '../router';
import type { Attempt, EventDetail, Notification, TransferEvent } from '../types';

const ERROR_CLASS_TEXT: Record<string, string> = {
  timeout: 'No answer within 10 s',
  tls: 'TLS handshake or certificate failed',
  refused: 'Connection refused',
  dns: 'Host name did not resolve',
  blocked: 'Blocked: the address is private or reserved',
  network: 'Network error',
  http: 'Non-2xx answer',
  lost: 'Worker stopped during the attempt; retried',
};

export function EventDetailPage({ eventId }: { eventId: string }) {
  const d = useLoad(() => get<EventDetail>(`/events/${encodeURIComponent(eventId)}`), [eventId]);
  const [message, setMessage] = useState<{ tone: 'success' | 'error'; text: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const { role, can, explain } = useRole();
  const manages = can('developer');
  useEffect(() => {
    document.title = `Event ${eventId} · tronwatch`;
  }, [eventId]);
  // Live: a new attempt (a redelivery's, a retry's) appears without a reload.
  useLive((c) => {
    if (c === null || c.event_ids.includes(eventId)) void d.reload();
  });

  const redeliver = async () => {
    setBusy(true);
    setMessage(null);
    try {
      const r = await post<{ notification_id: string }>(
        `/events/${encodeURIComponent(eventId)}/redeliver`,
      );
      setMessage({
        tone: 'success',
        text: `Redelivery queued (${r.notification_id}): the first attempt is made now.`,
      });
      await d.reload();
    } catch (e) {
      setMessage({ tone: 'error', text: `Redelivery failed: ${explain(e)}` });
    } finally {
      setBusy(false);
    }
  };

  return (
    <section>
      <nav class="breadcrumb" aria-label="Breadcrumb">
        <Link href={`${BASE}/events`}>Events</Link> <span aria-hidden="true">/</span>{' '}
        <span class="mono">{eventId}</span>
      </nav>
      <header class="page-header">
        <div>
          <h1 tabIndex={-1} data-page-title>
            {d.data
              ? `${d.data.event.amount} ${d.data.event.asset} ${d.data.event.direction}`
              : 'Event'}
          </h1>
          {d.data && (
            <p class="page-description">
              <Time iso={d.data.event.block_timestamp} /> · block{' '}
              <span class="mono">{d.data.event.block_number}</span>
            </p>
          )}
        </div>
        <div class="page-actions">
          {d.data && manages && (
            <button
              type="button"
              class="btn btn-primary"
              disabled={busy}
              onClick={() => void redeliver()}
            >
              {busy ? 'Redelivering…' : 'Redeliver'}
            </button>
          )}
        </div>
      </header>
      {d.data && !manages && <RoleNote role={role} needed="developer" what="to redeliver it" />}
      <div aria-live="polite">
        {message && (
          <Notice tone={message.tone} onDismiss={() => setMessage(null)}>
            {message.text}
          </Notice>
        )}
      </div>
      {d.error !== undefined &&
        (d.error instanceof ApiError && d.error.status === 404 ? (
          <Notice tone="error">
            No event <span class="mono">{eventId}</span> in this account.{' '}
            <Link href={`${BASE}/events`}>Back to events</Link>
          </Notice>
        ) : (
          <Notice tone="error">Could not load the event: {describeError(d.error)}</Notice>
        ))}
      {d.data === undefined ? (
        d.error === undefined && <Loading label="Loading the event…" />
      ) : (
        <EventBody detail={d.data} />
      )}
    </section>
  );
}

function EventBody({ detail }: { detail: EventDetail }) {
  const { event, payload, notifications, channel } = detail;
  return (
    <div class="stack">
      <article class="card">
        <h2 class="card-title">Transfer</h2>
        <EventFields event={event} label={detail.watch_label ?? null} />
      </article>

      <article class="card">
        <h2 class="card-title">Deliveries</h2>
        {notifications.length === 0 ? (
          <p class="muted">No delivery was created for this event.</p>
        ) : (
          notifications.map((n, i) => (
            <NotificationBlock
              key={n.id}
              n={n}
              latest={i === 0}
              total={notifications.length}
              chat={channel === 'telegram'}
            />
          ))
        )}
      </article>

      {channel === 'telegram' && detail.telegram ? (
        <ChatMessage telegram={detail.telegram} />
      ) : (
        <article class="card">
          <h2 class="card-title">Payload</h2>
          <p class="muted">
            The exact body bytes POSTed to the endpoint (the same for every attempt and redelivery);
            X-Signature is the HMAC-SHA256 of these bytes keyed by the watch secret.
          </p>
          <Payload payload={payload} />
        </article>
      )}
    </div>
  );
}

/** Text of Bot API HTML as the chat shows it (the markup parsed, never run). */
function chatText(html: string): string {
  return new DOMParser().parseFromString(html, 'text/html').body.textContent ?? '';
}

/** A chat delivery: where it goes and the message sent (the same for every attempt). */
function ChatMessage({ telegram }: { telegram: NonNullable<EventDetail['telegram']> }) {
  const chat = telegram.chat;
  return (
    <article class="card" aria-labelledby="chat-title">
      <h2 class="card-title" id="chat-title">
        Telegram message
      </h2>
      <dl class="facts">
        <div>
          <dt>Chat</dt>
          <dd>
            {chat === null ? (
              <span class="muted">No chat is bound now: attempts fail until one is connected.</span>
            ) : (
              <>
                {chat.title ?? 'Untitled chat'}{' '}
                <span class="muted">
                  ({chat.type ?? 'chat'} · id <code class="mono">{chat.id}</code>)
                </span>
              </>
            )}
          </dd>
        </div>
      </dl>
      <h3 class="subhead">Message sent</h3>
      <p class="chat-bubble">{chatText(telegram.message_html)}</p>
      <CodeBlock
        code={telegram.message_html}
        label="Bot API sendMessage text (parse_mode HTML)"
        copyLabel="Copy message"
      />
    </article>
  );
}

/** The payload as sent, or indented for reading (values untouched: numbers are never parsed). */
function Payload({ payload }: { payload: string }) {
  const [pretty, setPretty] = useState(false);
  return (
    <>
      <div class="payload-tools">
        <button
          type="button"
          class="btn btn-secondary btn-small"
          aria-pressed={pretty}
          onClick={() => setPretty(!pretty)}
        >
          Indent for reading
        </button>
      </div>
      <CodeBlock
        code={pretty ? indentJson(payload) : payload}
        label={
          pretty
            ? 'Request body (indented; the bytes sent are unindented)'
            : 'Request body (exact bytes)'
        }
        copyLabel="Copy payload"
      />
    </>
  );
}

/** What an event's `proof` says (SPEC §Event `proof`), in words. */
const PROOF_WORDS: Record<TransferEvent['proof'], string> = {
  signed: 'signed: read from signed transaction bytes proven against the block header',
  quorum: 'quorum: two or more node providers agreed; no block header commits to it',
  provider: 'provider: one node provider’s word; check a large amount yourself before crediting',
  test: 'test deposit: triggered through the API, on no chain (no money)',
};

function ProofNote({ proof, txId }: { proof: TransferEvent['proof']; txId: string }) {
  // A test transfer (POST /v1/test/transfers) is on no chain: there is nothing to prove or check.
  if (txId.startsWith('test_')) {
    return (
      <span class="muted">test deposit: triggered through the API, on no chain (no money)</span>
    );
  }
  return <span class={`proof proof-${proof}`}>{PROOF_WORDS[proof] ?? proof}</span>;
}

function EventFields({ event, label }: { event: TransferEvent; label: string | null }) {
  const tronscan = tronscanTx(event.tx_id, event.network);
  const rows: [string, ComponentChildren][] = [
    [
      'Amount',
      <span class="amount-exact">
        {event.amount} {event.asset}
      </span>,
    ],
    ['Amount (raw, 6 decimals)', <code class="mono">{event.amount_raw}</code>],
    ['Direction', event.direction],
    ['Proof', <ProofNote proof={event.proof} txId={event.tx_id} />],
    ['From', <Mono value={event.from} full label="Copy sender address" />],
    ['To', <Mono value={event.to} full label="Copy recipient address" />],
    [
      'Transaction',
      <span class="mono-wrap">
        <Mono value={event.tx_id} keep={10} label="Copy transaction id" />
        {tronscan !== null && (
          <a href={tronscan} target="_blank" rel="noopener noreferrer">
            Tronscan<span class="sr-only"> (opens in a new tab)</span>
          </a>
        )}
      </span>,
    ],
    ['Event index', <code class="mono">{event.event_index}</code>],
    ['Block', <code class="mono">{event.block_number}</code>],
    ['Block time', <Time iso={event.block_timestamp} />],
    [
      'Contract',
      event.contract ? (
        <Mono value={event.contract} full />
      ) : (
        <span class="muted">none (native TRX)</span>
      ),
    ],
    ['Event id', <Mono value={event.event_id} full label="Copy event id" />],
    [
      'Watch',
      // By its label (what a person named it), its id kept beside: the id is what the API and
      // the logs say. The label links to the watch's page, the id to its events.
      <span class="watch-ref">
        {label !== null && (
          <>
            <Link href={`${BASE}/watches/${encodeURIComponent(event.watch_id)}`}>{label}</Link>{' '}
          </>
        )}
        <Link
          href={`${BASE}/events?watch_id=${encodeURIComponent(event.watch_id)}`}
          aria-label={`Events of watch ${event.watch_id}`}
        >
          <code class="mono">{event.watch_id}</code>
        </Link>
      </span>,
    ],
    ['Network', event.network],
    ['Type · API version', `${event.type} · ${event.api_version}`],
  ];
  return (
    <dl class="facts facts-grid">
      {rows.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}

function NotificationBlock({
  n,
  latest,
  total,
  chat,
}: {
  n: Notification;
  latest: boolean;
  total: number;
  chat: boolean;
}) {
  return (
    <section class="notification" aria-label={`Delivery ${n.id}`}>
      <header>
        <h3 class="notification-title">
          {latest ? (total > 1 ? 'Latest delivery' : 'Delivery') : 'Earlier delivery'}{' '}
          <StatusPill status={n.status} />
        </h3>
        <p class="muted notification-meta">
          <span class="mono">{n.id}</span> · created <Time iso={n.created_at} /> · {n.attempts} of 6
          attempts
          {n.delivered_at && (
            <>
              {' '}
              · delivered <Time iso={n.delivered_at} />
            </>
          )}
          {n.status === 'PENDING' && n.next_attempt_at && (
            <>
              {' '}
              · next attempt <Time iso={n.next_attempt_at} rel /> (<Time iso={n.next_attempt_at} />)
            </>
          )}
        </p>
      </header>
      {n.held && (
        <div class={`notice notice-warning held-note`} role="status">
          <p>{heldWords(n.held.reason)}</p>
          <p class="muted">
            Held since <Time iso={n.held.since} />
            {n.held.detail !== null && <> · last check: {n.held.detail}</>}
          </p>
        </div>
      )}
      {n.attempt_log.length === 0 ? (
        <p class="muted">
          {n.held
            ? 'No attempt: nothing is sent while the delivery is held.'
            : 'No attempt yet: the first one is made within seconds.'}
        </p>
      ) : (
        <table class="table attempts">
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Started</th>
              <th scope="col">Duration</th>
              <th scope="col">Result</th>
              <th scope="col">Details</th>
            </tr>
          </thead>
          <tbody>
            {n.attempt_log.map((a, i) => (
              <AttemptRow key={`${a.attempt}-${a.throttled ? 't' : 'a'}-${i}`} a={a} chat={chat} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** A Bot API answer's JSON, indented; the text as recorded when it is not JSON. */
function botAnswer(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}

function AttemptResult({ a, chat }: { a: Attempt; chat: boolean }) {
  if (a.throttled) {
    // A Bot API 429: the chat asked the bot to wait; not one of the six attempts.
    return (
      <span class="delivery-cell">
        <Pill tone="amber">HTTP {a.http_status ?? 429}</Pill>
        <span>rate limited, not counted</span>
        {a.error && <span class="muted">{a.error}</span>}
      </span>
    );
  }
  const ok = a.http_status !== null && a.http_status >= 200 && a.http_status < 300;
  if (chat && a.http_status !== null) {
    return (
      <span class="delivery-cell">
        <Pill tone={ok ? 'green' : 'red'}>{ok ? 'Sent' : `Bot API ${a.http_status}`}</Pill>
        {a.error && <span class="muted">{a.error}</span>}
      </span>
    );
  }
  if (a.http_status !== null) {
    return (
      <span class="delivery-cell">
        <Pill tone={ok ? 'green' : 'red'}>HTTP {a.http_status}</Pill>
        {a.error && <span class="muted">{a.error}</span>}
      </span>
    );
  }
  return (
    <span class="delivery-cell">
      <Pill tone="red">{a.error_class ?? 'error'}</Pill>
      <span class="muted">
        {a.error ?? (a.error_class ? ERROR_CLASS_TEXT[a.error_class] : 'Failed')}
      </span>
    </span>
  );
}

function AttemptRow({ a, chat }: { a: Attempt; chat: boolean }) {
  return (
    <tr>
      <td data-label="#">{a.throttled ? `(${a.attempt})` : a.attempt}</td>
      <td data-label="Started">
        <Time iso={a.started_at} />
      </td>
      <td data-label="Duration">{durationMs(a.duration_ms)}</td>
      <td data-label="Result">
        <AttemptResult a={a} chat={chat} />
      </td>
      <td data-label="Details">
        {chat ? (
          <details class="attempt-details">
            <summary>Bot API answer</summary>
            {a.response_body === null || a.response_body === '' ? (
              <p class="muted">No answer recorded (the request did not reach the Bot API).</p>
            ) : (
              <pre class="excerpt">{botAnswer(a.response_body)}</pre>
            )}
          </details>
        ) : (
          <details class="attempt-details">
            <summary>Request and response</summary>
            <div class="attempt-grid">
              <div>
                <h4>Request headers sent</h4>
                <HeaderList headers={a.request_headers} />
              </div>
              <div>
                <h4>Response headers</h4>
                <HeaderList headers={a.response_headers} />
              </div>
            </div>
            <h4>Response body (first 4 KB)</h4>
            {a.response_body === null || a.response_body === '' ? (
              <p class="muted">{a.response_body === '' ? 'Empty.' : 'None recorded.'}</p>
            ) : (
              <pre class="excerpt">{a.response_body}</pre>
            )}
          </details>
        )}
      </td>
    </tr>
  );
}
