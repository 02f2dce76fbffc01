/**
 * One endpoint's page (issue 40 item 1, the Svix/Stripe endpoint view): its URL, state, pace and
 * secret; its success rate over the last hour, day or week with a chart; its newest attempts and
 * events (all its watches together); its watches. Developers change it in place: URL, label and
 * pace (PATCH), switch it off and on, send a test event, rotate the secret, redeliver its dead
 * letters and replay every failed delivery since a time (POST …/replay: idempotent, at most
 * 10,000 a call). Below the developer role the page reads only, the URL's query string masked
 * (src/console/mask.ts). Served by src/console/routes/endpoints.ts.
 */
import { useState } from 'preact/hooks';
import { ApiError, describeError, get, patch, post } from '../api';
import { EventsTable, useWatches } from '../components/events-table';
import {
  ConfirmDialog,
  Field,
  Loading,
  Mono,
  Notice,
  PageHeader,
  Pill,
  SecretOnce,
  Time,
} from '../components/ui';
import { durationMs, failingNow, plural, readableReason } from '../format';
import { useLoad } from '../hooks';
import { RoleNote, useRole } from '../roles';
import { BASE, Link } from '../router';
import type {
  Endpoint,
  EndpointAttempt,
  EndpointPageData,
  EndpointReplay,
  EventPage,
  TestResult,
} from '../types';
import { EndpointWatches, pace } from './endpoints';
import { HealthChart, rate } from './watch-detail';

type Win = 'hour' | 'day' | 'week';
const WINDOWS: { id: Win; label: string }[] = [
  { id: 'hour', label: 'Last hour' },
  { id: 'day', label: 'Last day' },
  { id: 'week', label: 'Last week' },
];

type Message = { tone: 'success' | 'error' | 'warning'; text: string } | null;

/** The endpoint's name for people: its label, else its URL without the scheme. */
function nameOf(e: Endpoint): string {
  return e.label ?? e.url.replace(/^https?:\/\//, '');
}

export function EndpointDetailPage({ endpointId }: { endpointId: string }) {
  const id = encodeURIComponent(endpointId);
  const [win, setWin] = useState<Win>('day');
  const data = useLoad(() => get<EndpointPageData>(`/endpoints/${id}?window=${win}`), [id, win]);
  const attempts = useLoad(
    () => get<{ data: EndpointAttempt[] }>(`/endpoints/${id}/attempts`).then((r) => r.data),
    [id],
  );
  const events = useLoad(
    () => get<EventPage>(`/events?endpoint_id=${id}&limit=10`).then((r) => r.data),
    [id],
  );
  const watches = useWatches();
  const [message, setMessage] = useState<Message>(null);
  const [secret, setSecret] = useState<string | null>(null);
  const [confirmRedeliver, setConfirmRedeliver] = useState(false);
  const [busy, setBusy] = useState<string | null>(null);
  const { role, can, explain } = useRole();
  const manages = can('developer');
  const e = data.data?.endpoint;

  const update = (next: Endpoint) => {
    if (data.data) data.setData({ ...data.data, endpoint: { ...data.data.endpoint, ...next } });
  };
  const reloadLists = () => {
    attempts.reload();
    events.reload();
  };

  /** Run one action of the page, its outcome said above it. */
  const act = async (what: string, fn: () => Promise<string>) => {
    setBusy(what);
    try {
      setMessage({ tone: 'success', text: await fn() });
    } catch (err) {
      setMessage({ tone: 'error', text: `Could not ${what}: ${explain(err)}` });
    } finally {
      setBusy(null);
    }
  };

  const toggle = (ep: Endpoint) =>
    act(ep.enabled ? 'switch it off' : 'switch it on', async () => {
      update(await patch<Endpoint>(`/endpoints/${id}`, { enabled: !ep.enabled }));
      return ep.enabled
        ? 'Switched off: its deliveries wait in the outbox, no attempt used, until you switch it on.'
        : 'Switched on: waiting deliveries go out within a minute.';
    });

  const sendTest = () =>
    act('send a test event', async () => {
      const r = await post<TestResult>(`/endpoints/${id}/test`);
      reloadLists();
      if (r.ok)
        return `Test event delivered: HTTP ${r.http_status} in ${durationMs(r.duration_ms)}.`;
      throw new Error(
        `the receiver answered ${r.http_status !== null ? `HTTP ${r.http_status}` : (r.error_class ?? 'nothing')}${r.error ? `: ${r.error}` : ''}`,
      );
    });

  const rotate = () =>
    act('rotate the secret', async () => {
      const r = await post<Endpoint & { secret: string }>(`/endpoints/${id}/rotate-secret`, {});
      const { secret: s, ...rest } = r;
      update(rest);
      setSecret(s);
      return 'Both secrets sign every delivery for 24 hours: switch your receiver to the new one.';
    });

  const redeliver = () =>
    act('redeliver the dead letters', async () => {
      setConfirmRedeliver(false);
      const r = await post<{ redelivered: number }>(`/endpoints/${id}/redeliver`);
      reloadLists();
      return r.redelivered === 0
        ? 'No dead letters to redeliver.'
        : `${plural(r.redelivered, 'dead letter')} queued again.`;
    });

  return (
    <section>
      <p class="breadcrumb">
        <Link href={`${BASE}/endpoints`}>Endpoints</Link> /
      </p>
      <PageHeader
        title={e ? nameOf(e) : 'Endpoint'}
        description={e ? <span class="url">{e.url}</span> : undefined}
      />
      {data.error !== undefined && (
        <Notice tone="error">
          {data.error instanceof ApiError && data.error.status === 404
            ? 'No such endpoint: it was deleted, belongs to another account or to the other environment.'
            : `Could not load the endpoint: ${describeError(data.error)}`}
        </Notice>
      )}
      {!e ? (
        data.error === undefined && <Loading label="Loading the endpoint…" />
      ) : (
        <>
          <div aria-live="polite">
            {message && (
              <Notice tone={message.tone} onDismiss={() => setMessage(null)}>
                {message.text}
              </Notice>
            )}
          </div>
          {secret && (
            <SecretOnce
              title={`New secret of ${nameOf(e)}`}
              secret={secret}
              copyLabel="Copy secret"
              onDone={() => setSecret(null)}
            />
          )}
          {!e.enabled && e.paused_reason && (
            <Notice tone="error">
              <strong>Switched off by tronwatch</strong>
              {e.auto_paused_at && (
                <>
                  {' '}
                  on <Time iso={e.auto_paused_at} />
                </>
              )}
              : {readableReason(e.paused_reason)}. Fix the receiver, then switch it on.
            </Notice>
          )}
          {e.health.alert && (
            <Notice tone="warning">
              <strong>Deliveries are failing</strong> since <Time iso={e.health.alert.since} />:{' '}
              {failingNow(e.health.consecutive_failures, e.health.alert.reason)}.
            </Notice>
          )}
          <dl class="facts facts-grid">
            {(
              [
                ['URL', <span class="url">{e.url}</span>],
                [
                  'State',
                  e.enabled ? <Pill tone="green">ON</Pill> : <Pill tone="gray">PAUSED</Pill>,
                ],
                ['Pace', pace(e)],
                ['Watches', plural(e.watch_count, 'watch', 'watches')],
                [
                  'Signing secret',
                  e.previous_secret_expires_at ? (
                    <span>
                      rotated; the old one signs too until{' '}
                      <Time iso={e.previous_secret_expires_at} />
                    </span>
                  ) : e.secret_rotated_at ? (
                    <span>
                      rotated <Time iso={e.secret_rotated_at} />
                    </span>
                  ) : (
                    'the one from creation'
                  ),
                ],
                ['Created', <Time iso={e.created_at} />],
                ['Id', <Mono value={e.id} full label="Copy endpoint id" />],
              ] as const
            ).map(([k, v]) => (
              <div key={k}>
                <dt>{k}</dt>
                <dd>{v}</dd>
              </div>
            ))}
          </dl>
          {manages ? (
            <div class="row-actions endpoint-actions">
              <button
                type="button"
                class="btn btn-secondary"
                disabled={busy !== null}
                onClick={() => void toggle(e)}
              >
                {e.enabled ? 'Switch off' : 'Switch on'}
              </button>
              <button
                type="button"
                class="btn btn-secondary"
                disabled={busy !== null}
                onClick={() => void sendTest()}
              >
                Send test event
              </button>
              <button
                type="button"
                class="btn btn-secondary"
                disabled={busy !== null}
                onClick={() => void rotate()}
              >
                Rotate secret
              </button>
              <button
                type="button"
                class="btn btn-secondary"
                disabled={busy !== null}
                onClick={() => setConfirmRedeliver(true)}
              >
                Redeliver dead letters
              </button>
            </div>
          ) : (
            <RoleNote role={role} needed="developer" what="to change this endpoint" />
          )}
          {confirmRedeliver && (
            <ConfirmDialog
              title="Redeliver this endpoint's dead letters?"
              confirmLabel="Redeliver"
              onConfirm={() => redeliver()}
              onCancel={() => setConfirmRedeliver(false)}
            >
              <p>
                Every event of its watches whose newest delivery is DEAD gets a new delivery (the
                same body, attempts from 0), at most 10,000 at a time.
              </p>
            </ConfirmDialog>
          )}
          <article class="card card-wide health-card" aria-labelledby="ep-health-title">
            <h2 id="ep-health-title" class="card-title">
              Success rate
            </h2>
            <div class="table-scroll">
              <table class="table health-table">
                <thead>
                  <tr>
                    <th scope="col">Window</th>
                    <th scope="col">Success rate</th>
                    <th scope="col">p95</th>
                    <th scope="col">Attempts</th>
                  </tr>
                </thead>
                <tbody>
                  {WINDOWS.map(({ id: w, label }) => {
                    const h = data.data?.windows[w];
                    return (
                      <tr key={w}>
                        <th scope="row">{label}</th>
                        <td data-label="Success rate">{rate(h?.success_rate ?? null)}</td>
                        <td data-label="p95">{h?.p95_ms == null ? '—' : durationMs(h.p95_ms)}</td>
                        <td data-label="Attempts">
                          {h?.succeeded ?? 0} of {h?.attempts ?? 0}
                        </td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </div>
            <fieldset class="segmented" aria-label="Chart window">
              {WINDOWS.map(({ id: w, label }) => (
                <button
                  key={w}
                  type="button"
                  class={`btn btn-small ${win === w ? 'btn-primary' : 'btn-secondary'}`}
                  aria-pressed={win === w}
                  onClick={() => setWin(w)}
                >
                  {label}
                </button>
              ))}
            </fieldset>
            <HealthChart buckets={data.data?.buckets ?? []} loading={data.loading} />
          </article>
          {manages && (
            <>
              <EditEndpoint
                endpoint={e}
                onSaved={(next) => {
                  update(next);
                  setMessage({ tone: 'success', text: 'Endpoint saved.' });
                }}
              />
              <ReplayForm
                endpointId={endpointId}
                onDone={(text, tone) => {
                  setMessage({ tone, text });
                  reloadLists();
                }}
              />
            </>
          )}
          <Attempts rows={attempts.data} error={attempts.error} />
          <section class="card card-wide" aria-labelledby="ep-events-title">
            <h2 id="ep-events-title" class="card-title">
              Events
            </h2>
            {events.error !== undefined ? (
              <Notice tone="error">Could not load them: {describeError(events.error)}</Notice>
            ) : events.data === undefined ? (
              <Loading />
            ) : events.data.length === 0 ? (
              <p class="muted">No events of its watches yet.</p>
            ) : (
              <div class="table-scroll">
                <EventsTable rows={events.data} watches={watches.data} />
              </div>
            )}
            <p>
              <Link href={`${BASE}/events?endpoint_id=${id}`}>All its events</Link> ·{' '}
              <Link href={`${BASE}/dead-letters?endpoint_id=${id}`}>Its dead letters</Link>
            </p>
          </section>
          <EndpointWatches id={endpointId} />
        </>
      )}
    </section>
  );
}

/** The newest attempts to the endpoint, all its watches together, as stored. */
function Attempts({ rows, error }: { rows: EndpointAttempt[] | undefined; error: unknown }) {
  return (
    <section class="card card-wide" aria-labelledby="ep-attempts-title">
      <h2 id="ep-attempts-title" class="card-title">
        Attempts
      </h2>
      {error !== undefined ? (
        <Notice tone="error">Could not load them: {describeError(error)}</Notice>
      ) : rows === undefined ? (
        <Loading />
      ) : rows.length === 0 ? (
        <p class="muted">No delivery attempts yet.</p>
      ) : (
        <div class="table-scroll">
          <table class="table" aria-label="Newest attempts">
            <thead>
              <tr>
                <th scope="col">Started</th>
                <th scope="col">Result</th>
                <th scope="col">Duration</th>
                <th scope="col">Event</th>
                <th scope="col">Watch</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((a) => (
                <tr key={`${a.event_id}-${a.started_at}-${a.attempt}`}>
                  <td data-label="Started">
                    <Time iso={a.started_at} />
                  </td>
                  <td data-label="Result">
                    {a.error === null ? (
                      <Pill tone="green">HTTP {a.http_status}</Pill>
                    ) : (
                      <>
                        <Pill tone="red">
                          {a.http_status !== null
                            ? `HTTP ${a.http_status}`
                            : (a.error_class ?? 'failed')}
                        </Pill>{' '}
                        <span class="muted">{a.error}</span>
                      </>
                    )}{' '}
                    <span class="muted">attempt {a.attempt}</span>
                  </td>
                  <td data-label="Duration">{durationMs(a.duration_ms)}</td>
                  <td data-label="Event">
                    <Link href={`${BASE}/events/${encodeURIComponent(a.event_id)}`}>
                      <code class="mono">{a.event_id.slice(0, 14)}…</code>
                    </Link>
                  </td>
                  <td data-label="Watch">
                    {a.watch_id ? (
                      <Link href={`${BASE}/watches/${encodeURIComponent(a.watch_id)}`}>
                        {a.watch_label ?? a.address ?? a.watch_id}
                      </Link>
                    ) : (
                      '—'
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

/** URL, label and pace, changed in place (PATCH /endpoints/{id}, checked as at creation). */
function EditEndpoint({
  endpoint,
  onSaved,
}: {
  endpoint: Endpoint;
  onSaved: (e: Endpoint) => void;
}) {
  const { explain } = useRole();
  const [url, setUrl] = useState(endpoint.url);
  const [label, setLabel] = useState(endpoint.label ?? '');
  const [rateLimit, setRateLimit] = useState(String(endpoint.rate_limit_per_second ?? ''));
  const [conc, setConc] = useState(String(endpoint.max_concurrency ?? ''));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const [generic, setGeneric] = useState<string | null>(null);

  const submit = async (ev: Event) => {
    ev.preventDefault();
    setError(null);
    setGeneric(null);
    const body: Record<string, unknown> = {};
    if (url.trim() !== endpoint.url) body.url = url.trim();
    if ((label.trim() || null) !== endpoint.label) body.label = label.trim() || null;
    const r = rateLimit.trim() === '' ? null : Number(rateLimit);
    if (r !== endpoint.rate_limit_per_second) body.rate_limit_per_second = r;
    const c = conc.trim() === '' ? null : Number(conc);
    if (c !== endpoint.max_concurrency) body.max_concurrency = c;
    if (Object.keys(body).length === 0) {
      setGeneric('Nothing changed.');
      return;
    }
    setBusy(true);
    try {
      onSaved(await patch<Endpoint>(`/endpoints/${encodeURIComponent(endpoint.id)}`, body));
    } catch (err) {
      if (err instanceof ApiError && err.body.details?.length) setError(err);
      else setGeneric(`Could not save: ${explain(err)}`);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card form-card" onSubmit={submit} noValidate aria-labelledby="ep-edit-title">
      <h2 id="ep-edit-title" class="card-title">
        Edit
      </h2>
      <div aria-live="polite">{generic && <Notice tone="error">{generic}</Notice>}</div>
      <Field
        label="URL"
        hint="Checked as at creation; deliveries under way go to the new URL from their next attempt. The secret stays the same."
        error={error?.fieldError('url')}
      >
        {({ id, describedBy }) => (
          <input
            id={id}
            type="url"
            aria-describedby={describedBy}
            value={url}
            onInput={(e) => setUrl(e.currentTarget.value)}
          />
        )}
      </Field>
      <Field label="Label" hint="Empty for none." error={error?.fieldError('label')}>
        {({ id, describedBy }) => (
          <input
            id={id}
            maxLength={100}
            aria-describedby={describedBy}
            value={label}
            onInput={(e) => setLabel(e.currentTarget.value)}
          />
        )}
      </Field>
      <div class="inline-fields">
        <Field
          label="Deliveries per second"
          hint="1 to 10,000; empty: no limit."
          error={error?.fieldError('rate_limit_per_second')}
        >
          {({ id, describedBy }) => (
            <input
              id={id}
              type="number"
              min={1}
              max={10000}
              aria-describedby={describedBy}
              value={rateLimit}
              onInput={(e) => setRateLimit(e.currentTarget.value)}
            />
          )}
        </Field>
        <Field
          label="At once"
          hint="1 to 1,000 in flight; empty: no cap."
          error={error?.fieldError('max_concurrency')}
        >
          {({ id, describedBy }) => (
            <input
              id={id}
              type="number"
              min={1}
              max={1000}
              aria-describedby={describedBy}
              value={conc}
              onInput={(e) => setConc(e.currentTarget.value)}
            />
          )}
        </Field>
      </div>
      <div class="form-actions">
        <button type="submit" class="btn btn-primary" disabled={busy}>
          {busy ? 'Saving…' : 'Save'}
        </button>
      </div>
    </form>
  );
}

/** Replay every failed delivery since a time (POST /endpoints/{id}/replay). */
function ReplayForm({
  endpointId,
  onDone,
}: {
  endpointId: string;
  onDone: (text: string, tone: 'success' | 'error' | 'warning') => void;
}) {
  const { explain } = useRole();
  // datetime-local: the user's local time, minutes; default one hour ago.
  const [since, setSince] = useState(() => localInput(new Date(Date.now() - 3_600_000)));
  const [busy, setBusy] = useState(false);
  const submit = async (ev: Event) => {
    ev.preventDefault();
    const at = new Date(since);
    if (Number.isNaN(at.getTime())) {
      onDone('Choose the time to replay from.', 'error');
      return;
    }
    setBusy(true);
    try {
      const r = await post<EndpointReplay>(`/endpoints/${encodeURIComponent(endpointId)}/replay`, {
        since: at.toISOString(),
      });
      const what = `${plural(r.replayed, 'failed delivery', 'failed deliveries')}`;
      onDone(
        r.repeated
          ? `Already replayed from this time (${what} queued then); nothing queued again. Choose another time to replay again.`
          : r.next_since
            ? `${what} queued again (the most one replay takes); replay again from ${new Date(r.next_since).toLocaleString()} for the rest.`
            : r.replayed === 0
              ? 'No failed deliveries since then.'
              : `${what} queued again.`,
        r.repeated ? 'warning' : 'success',
      );
    } catch (err) {
      onDone(`Could not replay: ${explain(err)}`, 'error');
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card form-card" onSubmit={submit} aria-labelledby="ep-replay-title">
      <h2 id="ep-replay-title" class="card-title">
        Replay failed deliveries
      </h2>
      <p class="muted">
        Every event of its watches since this time whose delivery failed (DEAD) is delivered again:
        the same body, attempts from 0. At most 10,000 at a time and 30 days back; the same time
        twice replays once.
      </p>
      <Field label="Since">
        {({ id }) => (
          <input
            id={id}
            type="datetime-local"
            value={since}
            onInput={(e) => setSince(e.currentTarget.value)}
          />
        )}
      </Field>
      <div class="form-actions">
        <button type="submit" class="btn btn-primary" disabled={busy}>
          {busy ? 'Replaying…' : 'Replay failed deliveries'}
        </button>
      </div>
    </form>
  );
}

/** `d` as a datetime-local input's value (local time, minutes). */
function localInput(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}
