/**
 * Watches: create (the API's fields), list, pause/resume, delete, send a test event. Every one of
 * these actions needs the developer role (src/console/routes/watches.ts); below it the list is
 * shown without them (web/src/roles.tsx).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, del, describeError, formatWait, get, post } from '../api';
import { EndpointLink, endpointName } from '../components/endpoint-link';
import {
  CodeBlock,
  ConfirmDialog,
  EmptyState,
  Field,
  HeaderList,
  Loading,
  Mono,
  Notice,
  PageHeader,
  Pill,
  SecretOnce,
  StatusPill,
  Time,
} from '../components/ui';
import { durationMs, failingNow, middle, plural, readableReason } from '../format';
import { useLoad } from '../hooks';
import { isRoleRefusal, RoleNote, useRole } from '../roles';
import { BASE, Link } from '../router';
import { useApp } from '../state';
import type {
  AssetFilter,
  Direction,
  Endpoint,
  EndpointAlert,
  TestResult,
  Watch,
  WatchAlert,
  WatchCreated,
  WatchListed,
} from '../types';
import { ChannelPill, plainUrlError, rate, urlTooLong } from './watch-detail';

type Msg = { tone: 'success' | 'error' | 'info'; text: string } | null;

export function curlCreateWatch(origin: string): string {
  return `curl -X POST ${origin}/v1/watches \\
  -H "Authorization: Bearer $TRONWATCH_API_KEY" \\
  -H "Content-Type: application/json" \\
  -d '{"address": "TXYZ...your deposit address", "asset_filter": "USDT", "direction": "incoming", "webhook_url": "https://example.com/webhooks/tron"}'`;
}

export function WatchesPage() {
  const watches = useLoad(() => get<{ data: WatchListed[] }>('/watches').then((r) => r.data), []);
  const [created, setCreated] = useState<WatchCreated | null>(null);
  const [message, setMessage] = useState<Msg>(null);
  const [deleting, setDeleting] = useState<WatchListed | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [test, setTest] = useState<{ watch: WatchListed; result: TestResult } | null>(null);
  const [showForm, setShowForm] = useState(false);
  const { role, can, explain } = useRole();
  const manages = can('developer');

  const replace = (w: Watch) =>
    watches.setData((watches.data ?? []).map((x) => (x.id === w.id ? { ...x, ...w } : x)));

  const setStatus = async (w: WatchListed, action: 'pause' | 'resume') => {
    setBusy(w.id);
    setMessage(null);
    try {
      replace(await post<Watch>(`/watches/${encodeURIComponent(w.id)}/${action}`));
      setMessage({
        tone: 'success',
        text:
          action === 'pause'
            ? `Watch ${middle(w.address, 6)} paused: it matches nothing and frees its quota slot.`
            : `Watch ${middle(w.address, 6)} resumed: it matches transfers from the next blocks on.`,
      });
    } catch (e) {
      setMessage({
        tone: 'error',
        text:
          e instanceof ApiError && e.code === 'quota_exceeded'
            ? `Cannot resume: your plan allows ${e.body.usage?.limit ?? 'no more'} active watches and all are in use. Pause or delete another watch first, or upgrade the plan.`
            : `Could not ${action} the watch: ${explain(e)}`,
      });
    } finally {
      setBusy(null);
    }
  };

  const sendTest = async (w: WatchListed) => {
    setBusy(w.id);
    setMessage(null);
    setTest(null);
    try {
      const result = await post<TestResult>(`/watches/${encodeURIComponent(w.id)}/test`);
      setTest({ watch: w, result });
    } catch (e) {
      setMessage({ tone: 'error', text: `Could not send a test event: ${explain(e)}` });
    } finally {
      setBusy(null);
    }
  };

  const remove = async (w: WatchListed) => {
    try {
      await del(`/watches/${encodeURIComponent(w.id)}`);
      watches.setData((watches.data ?? []).filter((x) => x.id !== w.id));
      setMessage({
        tone: 'success',
        text: `Watch ${middle(w.address, 6)} deleted. Deliveries already created keep their schedule.`,
      });
    } catch (e) {
      setMessage({ tone: 'error', text: `Could not delete the watch: ${explain(e)}` });
    } finally {
      setDeleting(null);
    }
  };

  const list = watches.data;
  return (
    <section>
      <PageHeader
        title="Watches"
        description="Addresses tronwatch watches, and where each confirmed transfer is delivered."
        actions={
          manages &&
          !showForm && (
            <button type="button" class="btn btn-primary" onClick={() => setShowForm(true)}>
              New watch
            </button>
          )
        }
      />
      <div aria-live="polite">
        {message && (
          <Notice tone={message.tone} onDismiss={() => setMessage(null)}>
            {message.text}
          </Notice>
        )}
      </div>
      {created && (
        <CreatedWatch
          w={created}
          onDone={() => {
            setCreated(null);
          }}
        />
      )}
      {!manages && (
        <RoleNote role={role} needed="developer" what="to create, pause, delete or test a watch" />
      )}
      {manages && showForm && (
        <CreateWatchForm
          onCancel={() => setShowForm(false)}
          onRefused={(text) => {
            setShowForm(false);
            setMessage({ tone: 'error', text: `Could not create the watch: ${text}` });
          }}
          onCreated={(w) => {
            setCreated(w);
            setShowForm(false);
            void watches.reload();
          }}
        />
      )}
      <div aria-live="polite">
        {test && <TestOutcome watch={test.watch} r={test.result} onClose={() => setTest(null)} />}
      </div>
      {watches.error !== undefined && (
        <Notice tone="error">Could not load watches: {describeError(watches.error)}</Notice>
      )}
      {list === undefined ? (
        watches.error === undefined && <Loading label="Loading watches…" />
      ) : list.length === 0 ? (
        <EmptyState title="No watches yet">
          {manages ? (
            <>
              <p>
                A watch is an address plus where to deliver its transfers.{' '}
                {!showForm && (
                  <button type="button" class="btn btn-link" onClick={() => setShowForm(true)}>
                    Create one with the form
                  </button>
                )}
                {showForm ? 'Use the form above' : ''}, or from your backend with an{' '}
                <Link href={`${BASE}/keys`}>API key</Link>:
              </p>
              <CodeBlock
                code={curlCreateWatch(location.origin)}
                label="Create a watch with curl"
                copyLabel="Copy curl"
              />
            </>
          ) : (
            <p>
              A watch is an address plus where to deliver its transfers. An owner, admin or
              developer of the account creates them, here or from a backend with an API key.
            </p>
          )}
        </EmptyState>
      ) : (
        <table class="table">
          <thead>
            <tr>
              <th scope="col">Watch</th>
              <th scope="col">Transfers</th>
              <th scope="col">Delivers to</th>
              <th scope="col">Health</th>
              <th scope="col">Status</th>
              <th scope="col">Last event</th>
              {manages && (
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              )}
            </tr>
          </thead>
          <tbody>
            {list.map((w) => (
              <tr key={w.id}>
                <td data-label="Watch">
                  {w.label && (
                    <div class="watch-label">
                      <Link href={`${BASE}/watches/${encodeURIComponent(w.id)}`}>{w.label}</Link>
                    </div>
                  )}
                  <Mono value={w.address} keep={8} label={`Copy address ${w.address}`} />
                  <div class="sub">
                    <Link
                      href={`${BASE}/watches/${encodeURIComponent(w.id)}`}
                      aria-label={`Open watch ${w.label ?? w.address}`}
                    >
                      Open
                    </Link>{' '}
                    ·{' '}
                    <span class="mono" title={w.id}>
                      {middle(w.id, 8)}
                    </span>{' '}
                    · created <Time iso={w.created_at} />
                  </div>
                </td>
                <td data-label="Transfers">
                  {w.asset_filter} · {w.direction}
                </td>
                <td data-label="Delivers to">
                  <ChannelPill channel={w.channel} />{' '}
                  {w.channel === 'telegram' ? (
                    <span>Telegram chat</span>
                  ) : w.endpoint_id !== null ? (
                    <EndpointLink id={w.endpoint_id} endpoint={w.endpoint} />
                  ) : (
                    <span class="url" title={w.webhook_url ?? ''}>
                      {w.webhook_url}
                    </span>
                  )}
                </td>
                <td data-label="Health">
                  <HealthCell w={w} />
                </td>
                <td data-label="Status">
                  <StatusPill status={w.status} />
                  {w.paused_reason && (
                    <div class="sub">paused by tronwatch: deliveries failing</div>
                  )}
                </td>
                <td data-label="Last event">
                  {w.last_event_at ? (
                    <Link href={`${BASE}/events?watch_id=${encodeURIComponent(w.id)}`}>
                      <Time iso={w.last_event_at} rel />
                    </Link>
                  ) : (
                    <span class="muted">none yet</span>
                  )}
                </td>
                {manages && (
                  <td data-label="Actions">
                    <div class="row-actions">
                      {w.channel === 'webhook' && (
                        <button
                          type="button"
                          class="btn btn-secondary btn-small"
                          disabled={busy === w.id}
                          aria-label={`Send test event to ${w.address}`}
                          onClick={() => void sendTest(w)}
                        >
                          Send test event
                        </button>
                      )}
                      <button
                        type="button"
                        class="btn btn-secondary btn-small"
                        disabled={busy === w.id}
                        aria-label={`${w.status === 'ACTIVE' ? 'Pause' : 'Resume'} ${w.address}`}
                        onClick={() =>
                          void setStatus(w, w.status === 'ACTIVE' ? 'pause' : 'resume')
                        }
                      >
                        {w.status === 'ACTIVE' ? 'Pause' : 'Resume'}
                      </button>
                      <button
                        type="button"
                        class="btn btn-danger-outline btn-small"
                        aria-label={`Delete ${w.address}`}
                        onClick={() => setDeleting(w)}
                      >
                        Delete
                      </button>
                    </div>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {deleting && (
        <ConfirmDialog
          title="Delete this watch?"
          confirmLabel="Delete watch"
          danger
          onConfirm={() => remove(deleting)}
          onCancel={() => setDeleting(null)}
        >
          <p>
            <code class="mono">{deleting.address}</code> stops being watched at once and its quota
            slot is freed. Its past events stay listed. Its webhook secret is gone for good: a new
            watch gets a new secret.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

/** The list's health cell: the day's success rate, the alert, or nothing to say. */
function HealthCell({ w }: { w: WatchListed }) {
  const h = w.health;
  if (!h) return <span class="muted">n/a (chat)</span>;
  if (h.alert) {
    return (
      <span>
        <Pill tone="red">Failing</Pill>
        <span class="sub"> {h.consecutive_failures} failed in a row</span>
      </span>
    );
  }
  if (h.day.attempts === 0) return <span class="muted">no attempts today</span>;
  const r = h.day.success_rate ?? 0;
  return (
    <span>
      <Pill tone={r >= 0.99 ? 'green' : r >= 0.9 ? 'amber' : 'red'}>
        {rate(h.day.success_rate)}
      </Pill>
      <span class="sub"> 24 h · p95 {h.day.p95_ms === null ? '—' : durationMs(h.day.p95_ms)}</span>
    </span>
  );
}

/**
 * A banner line's words: a failing watch's live count and since when; a pause's stored reason
 * made readable (its times local, its durations in units).
 */
function alertText(a: WatchAlert | EndpointAlert) {
  if (a.kind === 'auto_paused') return readableReason(a.reason);
  const count =
    a.consecutive_failures === undefined
      ? readableReason(a.reason)
      : failingNow(a.consecutive_failures, a.reason);
  return (
    <>
      {count}
      {a.since && (
        <>
          , since <Time iso={a.since} rel />
        </>
      )}
    </>
  );
}

/**
 * The console-wide banner (issue 19 item 2, issue 40 item 3): one line per failing or switched-off
 * endpoint, naming it with its watch count and linking its page, then the watches of their own
 * that fail or were paused, each linked to its page. On a phone (at most 640 px) more than one
 * alert folds into one line that opens the list. Reloaded on every route change.
 */
export function AlertBanner({ path }: { path: string }) {
  const alerts = useLoad(() => get<AlertsAnswer>('/alerts'), [path]);
  const phone = useNarrow();
  const [open, setOpen] = useState(false);
  const eps = alerts.data?.endpoints ?? [];
  const list = alerts.data?.data ?? [];
  const total = eps.length + list.length;
  if (total === 0) return null;
  const names = [
    ...eps.map((e) => endpointName(e)),
    ...list.map((a) => a.label ?? middle(a.address, 6)),
  ];
  if (phone && total > 1 && !open) {
    return (
      <section class="alert-banner" aria-label="Delivery alerts">
        <Notice tone="warning">
          <span class="alert-fold">
            <strong>{total} delivery alerts:</strong> {names.join(', ')}
          </span>{' '}
          <button type="button" class="btn btn-link" onClick={() => setOpen(true)}>
            Show
          </button>
        </Notice>
      </section>
    );
  }
  return (
    <section class="alert-banner" aria-label="Delivery alerts">
      {eps.slice(0, 5).map((e) => (
        <Notice key={e.endpoint_id} tone={e.kind === 'auto_paused' ? 'error' : 'warning'}>
          <strong>
            {e.kind === 'auto_paused' ? 'Endpoint switched off: ' : 'Endpoint failing: '}
          </strong>
          <Link href={`${BASE}/endpoints/${encodeURIComponent(e.endpoint_id)}`} class="alert-watch">
            {endpointName(e)}
          </Link>{' '}
          ({plural(e.watch_count, 'watch', 'watches')}) — {alertText(e)}
        </Notice>
      ))}
      {eps.length > 5 && (
        <p class="muted">and {eps.length - 5} more endpoints on the Endpoints page.</p>
      )}
      {list.slice(0, 3).map((a) => (
        <Notice key={a.watch_id} tone={a.kind === 'auto_paused' ? 'error' : 'warning'}>
          <strong>{a.kind === 'auto_paused' ? 'Watch paused: ' : 'Deliveries failing: '}</strong>
          <Link href={`${BASE}/watches/${encodeURIComponent(a.watch_id)}`} class="alert-watch">
            {a.label ?? middle(a.address, 8)}
          </Link>{' '}
          — {alertText(a)}
        </Notice>
      ))}
      {list.length > 3 && <p class="muted">and {list.length - 3} more on the Watches page.</p>}
    </section>
  );
}

/** GET /console/api/alerts */
interface AlertsAnswer {
  endpoints?: EndpointAlert[];
  data: WatchAlert[];
}

/** True while the window is at most 640 px wide (a phone), following resizes. */
function useNarrow(): boolean {
  const query = '(max-width: 640px)';
  const [narrow, setNarrow] = useState(() => window.matchMedia(query).matches);
  useEffect(() => {
    const m = window.matchMedia(query);
    const fn = () => setNarrow(m.matches);
    m.addEventListener('change', fn);
    return () => m.removeEventListener('change', fn);
  }, []);
  return narrow;
}

function CreatedWatch({ w, onDone }: { w: WatchCreated; onDone: () => void }) {
  if (!w.secret) {
    return (
      <Notice tone="success" onDismiss={onDone}>
        Watch created for <code class="mono">{w.address}</code>. {w.note}
      </Notice>
    );
  }
  return (
    <SecretOnce title="Webhook signing secret" secret={w.secret} onDone={onDone}>
      <p>
        Watch for <code class="mono">{w.address}</code> created. Verify each delivery's{' '}
        <code>X-Signature</code> header: lowercase hex HMAC-SHA256 of the raw body, keyed by this
        secret.
      </p>
    </SecretOnce>
  );
}

function CreateWatchForm({
  onCreated,
  onCancel,
  onRefused,
}: {
  onCreated: (w: WatchCreated) => void;
  onCancel: () => void;
  /** The server refused for the role (it changed while the page was open): the sentence. */
  onRefused: (text: string) => void;
}) {
  const { config } = useApp();
  const { explain } = useRole();
  const [address, setAddress] = useState('');
  const [asset, setAsset] = useState<AssetFilter>('USDT');
  const [direction, setDirection] = useState<Direction>('incoming');
  const [target, setTarget] = useState<'webhook' | 'telegram' | 'endpoint'>('webhook');
  // The account's endpoints (issue 30): a watch may deliver to one of them instead of its own URL.
  const endpoints = useLoad(() => get<{ data: Endpoint[] }>('/endpoints').then((r) => r.data), []);
  const [endpointId, setEndpointId] = useState('');
  // Whether a chat is connected (GET /console/api/telegram): a chat watch needs one.
  const chat = useLoad(
    () =>
      config.telegram
        ? get<{ chat: { title: string | null; id: string } | null }>('/telegram').then(
            (r) => r.chat,
          )
        : Promise.resolve(null),
    [config.telegram],
  );
  const chatBound = Boolean(chat.data);
  const [url, setUrl] = useState('');
  const [label, setLabel] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const [generic, setGeneric] = useState<string | null>(null);
  const [duplicateOf, setDuplicateOf] = useState<string | null>(null);
  const [local, setLocal] = useState<{ address?: string; webhook_url?: string }>({});

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setGeneric(null);
    setDuplicateOf(null);
    // The console's own messages, in plain words, before asking the server.
    const problems = localProblems(
      address.trim(),
      target === 'webhook' ? url.trim() : null,
      config.local_http === true,
    );
    setLocal(problems);
    if (problems.address || problems.webhook_url) {
      setGeneric('Check the highlighted fields.');
      return;
    }
    setBusy(true);
    try {
      const common = {
        address: address.trim(),
        asset_filter: asset,
        direction,
        ...(label.trim() !== '' ? { label: label.trim() } : {}),
      };
      const chosen = endpointId || endpoints.data?.[0]?.id || '';
      const body =
        target === 'webhook'
          ? { ...common, webhook_url: url.trim() }
          : target === 'endpoint'
            ? { ...common, endpoint_id: chosen }
            : { ...common, telegram: true };
      onCreated(await post<WatchCreated>('/watches', body));
    } catch (err) {
      if (isRoleRefusal(err)) {
        onRefused(explain(err));
      } else if (err instanceof ApiError) {
        setError(err);
        if (err.code === 'quota_exceeded') {
          const u = err.body.usage;
          setGeneric(
            u
              ? `Your ${u.plan} plan allows ${u.limit} active watches and ${u.active_watches} are active. Pause or delete one, or upgrade.`
              : err.message,
          );
        } else if (err.status === 409) {
          setGeneric('You already watch this address with the same assets, direction and channel.');
          setDuplicateOf(err.body.watch_id ?? null);
        } else if (err.code === 'telegram_not_bound') {
          setGeneric('No Telegram chat is connected yet: connect one on the Account page first.');
        } else if (err.status === 503) {
          setGeneric(
            `tronwatch has not seen the chain head yet, so it cannot place the watch. Try again in ${formatWait(err.retryAfter ?? 5)}.`,
          );
        } else if (!err.body.details?.length) {
          setGeneric(err.message);
        } else {
          setGeneric('Check the highlighted fields.');
        }
      } else {
        setGeneric(describeError(err));
      }
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card form-card" onSubmit={submit} noValidate aria-labelledby="new-watch-title">
      <h2 id="new-watch-title" class="card-title">
        New watch
      </h2>
      <div aria-live="polite">
        {generic && (
          <Notice tone="error">
            {generic}
            {duplicateOf && (
              <>
                {' '}
                <Link href={`${BASE}/watches/${encodeURIComponent(duplicateOf)}`}>
                  Open the existing watch
                </Link>
                .
              </>
            )}
          </Notice>
        )}
      </div>
      <Field
        label="TRON address"
        hint="Base58 (starts with T) or hex starting with 41. Transfers before the watch exists are not matched."
        error={local.address ?? plainAddressError(error?.fieldError('address'))}
      >
        {({ id, describedBy }) => (
          <input
            id={id}
            class="mono-input"
            required
            spellcheck={false}
            autoComplete="off"
            aria-describedby={describedBy}
            aria-invalid={local.address || error?.fieldError('address') ? true : undefined}
            value={address}
            onInput={(e) => setAddress(e.currentTarget.value)}
          />
        )}
      </Field>
      <div class="field-row">
        <Field label="Assets" error={error?.fieldError('asset_filter')}>
          {({ id }) => (
            <select
              id={id}
              value={asset}
              onChange={(e) => setAsset(e.currentTarget.value as AssetFilter)}
            >
              <option value="USDT">USDT (TRC-20)</option>
              <option value="TRX">TRX</option>
              <option value="ALL">USDT and TRX</option>
            </select>
          )}
        </Field>
        <Field label="Direction" error={error?.fieldError('direction')}>
          {({ id }) => (
            <select
              id={id}
              value={direction}
              onChange={(e) => setDirection(e.currentTarget.value as Direction)}
            >
              <option value="incoming">Incoming (deposits)</option>
              <option value="outgoing">Outgoing</option>
              <option value="both">Both</option>
            </select>
          )}
        </Field>
      </div>
      <fieldset class="field">
        <legend>Deliver to</legend>
        <div class="radio-row">
          <label>
            <input
              type="radio"
              name="target"
              value="webhook"
              checked={target === 'webhook'}
              onChange={() => setTarget('webhook')}
            />{' '}
            Webhook (HTTPS POST)
          </label>
          <label class={chatBound ? '' : 'disabled'}>
            <input
              type="radio"
              name="target"
              value="telegram"
              disabled={!chatBound}
              aria-describedby="telegram-target-note"
              checked={target === 'telegram'}
              onChange={() => setTarget('telegram')}
            />{' '}
            Telegram chat
            {chatBound && chat.data ? ` (${chat.data.title ?? chat.data.id})` : ''}
          </label>
          <label class={endpoints.data?.length ? '' : 'disabled'}>
            <input
              type="radio"
              name="target"
              value="endpoint"
              disabled={!endpoints.data?.length}
              checked={target === 'endpoint'}
              onChange={() => setTarget('endpoint')}
            />{' '}
            An endpoint
          </label>
        </div>
        {!chatBound && (
          <p class="muted" id="telegram-target-note">
            {!config.telegram ? (
              'Telegram delivery is not available on this deployment.'
            ) : chat.loading ? (
              'Checking for a connected Telegram chat…'
            ) : chat.error ? (
              'Telegram is unavailable right now.'
            ) : (
              <>
                No Telegram chat is connected:{' '}
                <Link href={`${BASE}/account`}>connect one on the Account page</Link> first.
              </>
            )}
          </p>
        )}
      </fieldset>
      {target === 'endpoint' && (
        <Field
          label="Endpoint"
          hint="Its URL receives the deliveries, signed with its secret: this watch gets no secret of its own."
          error={error?.fieldError('endpoint_id')}
        >
          {({ id, describedBy }) => (
            <select
              id={id}
              aria-describedby={describedBy}
              value={endpointId || endpoints.data?.[0]?.id}
              onChange={(e) => setEndpointId(e.currentTarget.value)}
            >
              {(endpoints.data ?? []).map((ep) => (
                <option key={ep.id} value={ep.id}>
                  {ep.label ?? ep.url}
                </option>
              ))}
            </select>
          )}
        </Field>
      )}
      {target === 'webhook' && (
        <Field
          label="Webhook URL"
          hint={`A public https endpoint, at most 2,048 characters${url.length > 1900 ? ` (now ${url.length.toLocaleString('en')})` : ''}. It must answer 2xx within 10 s.`}
          error={local.webhook_url ?? plainUrlError(error?.fieldError('webhook_url'))}
        >
          {({ id, describedBy }) => (
            <input
              id={id}
              type="url"
              required
              placeholder="https://example.com/webhooks/tron"
              aria-describedby={describedBy}
              aria-invalid={
                local.webhook_url || error?.fieldError('webhook_url') ? true : undefined
              }
              value={url}
              onInput={(e) => setUrl(e.currentTarget.value)}
            />
          )}
        </Field>
      )}
      <Field
        label="Label (optional)"
        hint="Your name for this watch, shown in every list. At most 100 characters."
        error={error?.fieldError('label')}
      >
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
      <div class="form-actions">
        <button type="submit" class="btn btn-primary" disabled={busy}>
          {busy ? 'Creating…' : 'Create watch'}
        </button>
        <button type="button" class="btn btn-secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** A TRON address in base58 (T + 33 characters) or hex (41 + 40 hex digits), by its form only. */
const ADDRESS_FORM = /^(T[1-9A-HJ-NP-Za-km-z]{33}|41[0-9a-fA-F]{40})$/;

/** The create form's own checks, in plain words (the server checks again, fully). */
export function localProblems(
  address: string,
  url: string | null,
  /** The deployment admits plain http inside WEBHOOK_ALLOW_CIDRS (config `local_http`). */
  allowHttp = false,
): { address?: string; webhook_url?: string } {
  const out: { address?: string; webhook_url?: string } = {};
  if (address === '') out.address = 'Enter the TRON address to watch.';
  else if (!ADDRESS_FORM.test(address)) {
    out.address =
      'A TRON address has 34 characters and starts with T (or 42 hex digits starting with 41).';
  }
  if (url !== null) {
    if (url === '') out.webhook_url = 'Enter the URL tronwatch should POST each transfer to.';
    else if (url.length > 2048) out.webhook_url = urlTooLong(url.length);
    else if (allowHttp ? !/^https?:\/\//i.test(url) : !/^https:\/\//i.test(url)) {
      out.webhook_url = allowHttp
        ? 'The URL must start with https:// (or http:// for an address this deployment allows).'
        : 'The URL must start with https://.';
    }
  }
  return out;
}

/** The server's address refusal in plain words. */
function plainAddressError(message: string | undefined): string | undefined {
  if (!message) return undefined;
  return `A TRON address has 34 characters and starts with T (or 42 hex digits starting with 41): ${message}.`;
}

function TestOutcome({
  watch,
  r,
  onClose,
}: {
  watch: WatchListed;
  r: TestResult;
  onClose: () => void;
}) {
  const summary = r.ok
    ? `Test event delivered: HTTP ${r.http_status} in ${durationMs(r.duration_ms)}.`
    : r.http_status !== null
      ? `Test event not acknowledged: HTTP ${r.http_status} in ${durationMs(r.duration_ms)}.`
      : `Test event failed (${r.error_class ?? 'error'}): ${r.error ?? 'no answer'}.`;
  const ref = useRef<HTMLElement>(null);
  // The result appears above the list: bring it into view (the button may be far below).
  useEffect(() => {
    ref.current?.focus();
  }, []);
  return (
    <article
      class={`card test-outcome ${r.ok ? 'ok' : 'failed'}`}
      aria-label="Test event result"
      tabIndex={-1}
      ref={ref}
    >
      <header class="notification-head">
        <h2 class="card-title">
          Test event to <span class="url">{watch.webhook_url ?? middle(watch.address, 6)}</span>{' '}
          <Pill tone={r.ok ? 'green' : 'red'}>{r.ok ? 'OK' : 'FAILED'}</Pill>
        </h2>
        <button type="button" class="btn btn-secondary btn-small" onClick={onClose}>
          Close
        </button>
      </header>
      <p role="status">{summary}</p>
      <p class="muted">
        A <code>webhook.test</code>, not a <code>transfer.confirmed</code>: signed like a real
        delivery so your endpoint can check its verification, but it moves nothing (amount 0,{' '}
        <code>test: true</code>, marked <code>X-Tronwatch-Test: 1</code>). Credit only{' '}
        <code>transfer.confirmed</code>. It is not stored, never appears in Events, and an account
        can send 10 a minute.
      </p>
      <details>
        <summary>Request sent</summary>
        <p>
          <code class="mono">POST {r.request.url}</code>
        </p>
        <HeaderList headers={r.request.headers} />
        <CodeBlock code={r.request.body} label="Request body" copyLabel="Copy body" />
      </details>
      <details open={!r.ok}>
        <summary>Response</summary>
        <h4>Headers</h4>
        <HeaderList headers={r.response_headers} />
        <h4>Body (first 4 KB)</h4>
        {r.response_body ? (
          <pre class="excerpt">{r.response_body}</pre>
        ) : (
          <p class="muted">None.</p>
        )}
      </details>
    </article>
  );
}
