/** Watches: create (the API's fields), list, pause/resume, delete, send a test event. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, del, describeError, formatWait, get, post } from '../api';
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
import { durationMs, middle } from '../format';
import { useLoad } from '../hooks';
import { BASE, Link } from '../router';
import { useApp } from '../state';
import type {
  AssetFilter,
  Direction,
  TestResult,
  Watch,
  WatchCreated,
  WatchListed,
} from '../types';

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
            : `Could not ${action} the watch: ${describeError(e)}`,
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
      setMessage({ tone: 'error', text: `Could not send a test event: ${describeError(e)}` });
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
      setMessage({ tone: 'error', text: `Could not delete the watch: ${describeError(e)}` });
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
      {showForm && (
        <CreateWatchForm
          onCancel={() => setShowForm(false)}
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
        </EmptyState>
      ) : (
        <table class="table">
          <thead>
            <tr>
              <th scope="col">Address</th>
              <th scope="col">Transfers</th>
              <th scope="col">Delivers to</th>
              <th scope="col">Status</th>
              <th scope="col">Last event</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.map((w) => (
              <tr key={w.id}>
                <td data-label="Address">
                  <Mono value={w.address} keep={8} label={`Copy address ${w.address}`} />
                  <div class="sub">
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
                  {w.channel === 'telegram' ? (
                    <span>Telegram chat</span>
                  ) : (
                    <span class="url" title={w.webhook_url ?? ''}>
                      {w.webhook_url}
                    </span>
                  )}
                </td>
                <td data-label="Status">
                  <StatusPill status={w.status} />
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
                      onClick={() => void setStatus(w, w.status === 'ACTIVE' ? 'pause' : 'resume')}
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
}: {
  onCreated: (w: WatchCreated) => void;
  onCancel: () => void;
}) {
  const { config } = useApp();
  const [address, setAddress] = useState('');
  const [asset, setAsset] = useState<AssetFilter>('USDT');
  const [direction, setDirection] = useState<Direction>('incoming');
  const [target, setTarget] = useState<'webhook' | 'telegram'>('webhook');
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
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const [generic, setGeneric] = useState<string | null>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setGeneric(null);
    try {
      const body =
        target === 'webhook'
          ? { address: address.trim(), asset_filter: asset, direction, webhook_url: url.trim() }
          : { address: address.trim(), asset_filter: asset, direction, telegram: true };
      onCreated(await post<WatchCreated>('/watches', body));
    } catch (err) {
      if (err instanceof ApiError) {
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
    <form class="card form-card" onSubmit={submit} aria-labelledby="new-watch-title">
      <h2 id="new-watch-title" class="card-title">
        New watch
      </h2>
      <div aria-live="polite">{generic && <Notice tone="error">{generic}</Notice>}</div>
      <Field
        label="TRON address"
        hint="Base58 (starts with T) or hex starting with 41. Transfers before the watch exists are not matched."
        error={error?.fieldError('address')}
      >
        {({ id, describedBy }) => (
          <input
            id={id}
            class="mono-input"
            required
            spellcheck={false}
            autoComplete="off"
            aria-describedby={describedBy}
            aria-invalid={error?.fieldError('address') ? true : undefined}
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
      {target === 'webhook' && (
        <Field
          label="Webhook URL"
          hint="A public https endpoint, at most 2048 characters. It must answer 2xx within 10 s."
          error={error?.fieldError('webhook_url')}
        >
          {({ id, describedBy }) => (
            <input
              id={id}
              type="url"
              required
              maxLength={2048}
              placeholder="https://example.com/webhooks/tron"
              aria-describedby={describedBy}
              aria-invalid={error?.fieldError('webhook_url') ? true : undefined}
              value={url}
              onInput={(e) => setUrl(e.currentTarget.value)}
            />
          )}
        </Field>
      )}
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
