/**
 * One watch's page (issue 19 items 1, 3, 4): its endpoint health (hour/day/week figures and a
 * uPlot chart of success rate and p95 latency), its alert or automatic pause, the edit form
 * (webhook URL, label: PATCH, checked as at creation) and the secret rotation with a grace period.
 * Editing and rotating need the developer role (src/console/routes/watches.ts); below it the page
 * shows the same facts, the secret's rotation state among them, without the forms.
 */
import 'uplot/dist/uPlot.min.css';
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { ApiError, describeError, get, patch, post } from '../api';
import { EndpointLink } from '../components/endpoint-link';
import {
  ConfirmDialog,
  Field,
  Loading,
  Mono,
  Notice,
  PageHeader,
  Pill,
  SecretOnce,
  StatusPill,
  Time,
} from '../components/ui';
import { durationMs, failingNow, plural, readableReason } from '../format';
import { useLoad } from '../hooks';
import { isRoleRefusal, RoleNote, useRole } from '../roles';
import { BASE, Link } from '../router';
import { useApp } from '../state';
import type { HealthBucket, Watch, WatchHealth, WatchHealthSeries } from '../types';

type Win = 'hour' | 'day' | 'week';
const WINDOWS: { id: Win; label: string }[] = [
  { id: 'hour', label: 'Last hour' },
  { id: 'day', label: 'Last day' },
  { id: 'week', label: 'Last week' },
];

/** A rate 0..1 as "97.5 %", or "—" without attempts. */
export function rate(r: number | null): string {
  if (r === null) return '—';
  const pct = r * 100;
  return `${pct === 100 || pct === 0 ? pct.toFixed(0) : pct.toFixed(1)} %`;
}

export function WatchDetailPage({ watchId }: { watchId: string }) {
  const [win, setWin] = useState<Win>('day');
  const data = useLoad(
    () => get<WatchHealthSeries>(`/watches/${encodeURIComponent(watchId)}/health?window=${win}`),
    [watchId, win],
  );
  const [secret, setSecret] = useState<string | null>(null);
  const [message, setMessage] = useState<{ tone: 'success' | 'error'; text: string } | null>(null);
  const { role, can } = useRole();
  const manages = can('developer');
  const testMode = useApp().config.environment === 'test';
  /** A form's action refused for the role: said above the page (the form then goes). */
  const refused = (what: string) => (text: string) =>
    setMessage({ tone: 'error', text: `Could not ${what}: ${text}` });
  const w = data.data?.watch;
  const update = (next: Watch) => {
    if (data.data) data.setData({ ...data.data, watch: { ...data.data.watch, ...next } });
  };
  const title = w ? (w.label ?? 'Watch') : 'Watch';
  return (
    <section>
      <p class="breadcrumb">
        <Link href={`${BASE}/watches`}>Watches</Link> /
      </p>
      <PageHeader
        title={title}
        description={w ? <Mono value={w.address} keep={10} label="Copy address" /> : undefined}
      />
      {data.error !== undefined && (
        <Notice tone="error">
          {data.error instanceof ApiError && data.error.status === 404
            ? 'No such watch: it was deleted, or belongs to another account.'
            : `Could not load the watch: ${describeError(data.error)}`}
        </Notice>
      )}
      {!w ? (
        data.error === undefined && <Loading label="Loading the watch…" />
      ) : (
        <>
          <div aria-live="polite">
            {message && (
              <Notice tone={message.tone} onDismiss={() => setMessage(null)}>
                {message.text}
              </Notice>
            )}
          </div>
          {w.status === 'PAUSED' && w.paused_reason && (
            <Notice tone="error">
              <strong>Paused by tronwatch</strong>
              {w.auto_paused_at ? (
                <>
                  {' '}
                  on <Time iso={w.auto_paused_at} />
                </>
              ) : null}
              : {readableReason(w.paused_reason)}. Fix the endpoint, then{' '}
              {manages ? 'resume the watch' : 'a developer resumes the watch'} on the Watches page.
            </Notice>
          )}
          {testMode && manages && w.status === 'ACTIVE' && (
            <TestDeposit watch={w} onDone={(text, tone) => setMessage({ tone, text })} />
          )}
          {w.health?.alert && (
            <Notice tone="warning">
              <strong>Deliveries are failing</strong> since <Time iso={w.health.alert.since} />:{' '}
              {failingNow(w.health.consecutive_failures, w.health.alert.reason)}.
            </Notice>
          )}
          <dl class="facts facts-grid watch-facts">
            {(
              [
                ['Channel', <ChannelPill key="c" channel={w.channel} />],
                [
                  'Delivers to',
                  w.channel === 'telegram' ? (
                    'The Telegram chat connected to the account'
                  ) : w.endpoint_id !== null ? (
                    <EndpointLink id={w.endpoint_id} endpoint={data.data?.endpoint ?? null} />
                  ) : (
                    <span class="url">{w.webhook_url}</span>
                  ),
                ],
                ['Transfers', `${w.asset_filter} · ${w.direction}`],
                ['Status', <StatusPill key="s" status={w.status} />],
                ['Created', <Time key="t" iso={w.created_at} />],
                [
                  'Matches',
                  `transfers in blocks after ${w.active_from_block.toLocaleString('en-US')} (the chain head when created or last resumed)`,
                ],
                ['Id', <span class="mono">{w.id}</span>],
                // The rotation card says this to those who may rotate; the others read it here.
                ...(w.endpoint_id !== null
                  ? ([
                      [
                        'Signing secret',
                        "The endpoint's: every delivery of this watch is signed with the endpoint's secret (rotate it on the endpoint's page)",
                      ],
                    ] as const)
                  : !manages && w.channel === 'webhook'
                    ? ([['Signing secret', <SecretState key="k" watch={w} />]] as const)
                    : []),
              ] as const
            ).map(([k, v]) => (
              <div key={k}>
                <dt>{k}</dt>
                <dd>{v}</dd>
              </div>
            ))}
          </dl>
          {w.health && (
            <HealthCard
              health={w.health}
              buckets={data.data?.buckets ?? []}
              win={win}
              setWin={setWin}
              loading={data.loading}
            />
          )}
          {!manages && (
            <RoleNote
              role={role}
              needed="developer"
              what="to edit this watch or rotate its secret"
            />
          )}
          {manages && (
            <>
              <EditWatch
                watch={w}
                onRefused={refused('save the watch')}
                onSaved={(next) => {
                  update(next);
                  setMessage({ tone: 'success', text: 'Watch saved.' });
                }}
              />
              {w.channel === 'webhook' &&
                w.endpoint_id === null &&
                (secret ? (
                  <SecretOnce
                    title="New webhook signing secret"
                    secret={secret}
                    onDone={() => setSecret(null)}
                  >
                    <p>
                      Deliveries now carry <code>X-Signature</code> with this secret and{' '}
                      <code>X-Signature-Previous</code> with the old one
                      {w.previous_secret_expires_at ? (
                        <>
                          {' '}
                          until <Time iso={w.previous_secret_expires_at} />
                        </>
                      ) : (
                        ' (no grace period: the old secret no longer signs)'
                      )}
                      ; <code>webhook-signature</code> lists both.
                    </p>
                  </SecretOnce>
                ) : (
                  <RotateSecret
                    watch={w}
                    onRefused={refused('change the signing secret')}
                    onRotated={(next, s) => {
                      update(next);
                      setSecret(s);
                    }}
                    onExpired={(next) => {
                      update(next);
                      setMessage({
                        tone: 'success',
                        text: 'Grace period ended: only the new secret signs deliveries now.',
                      });
                    }}
                  />
                ))}
            </>
          )}
        </>
      )}
    </section>
  );
}

/**
 * Test mode (issue 32): trigger a deposit for this test watch. It is delivered as a real
 * `transfer.confirmed` (livemode false) through the outbox, retries and all; the Events page
 * shows it.
 */
function TestDeposit({
  watch,
  onDone,
}: {
  watch: Watch;
  onDone: (text: string, tone: 'success' | 'error') => void;
}) {
  const [amount, setAmount] = useState('25');
  const [asset, setAsset] = useState<'USDT' | 'TRX'>(watch.asset_filter === 'TRX' ? 'TRX' : 'USDT');
  const [busy, setBusy] = useState(false);
  const trigger = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    try {
      const ev = await post<{ event_id: string; amount: string; asset: string }>(
        `/watches/${encodeURIComponent(watch.id)}/test-transfer`,
        { amount, asset },
      );
      onDone(`Test deposit of ${ev.amount} ${ev.asset} created: ${ev.event_id}.`, 'success');
    } catch (err) {
      onDone(`Could not trigger the test deposit: ${describeError(err)}`, 'error');
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card form-card" onSubmit={trigger} aria-labelledby="test-deposit-title">
      <h2 id="test-deposit-title" class="card-title">
        Test deposit
      </h2>
      <p class="muted">
        A synthetic transfer to this test watch's address, delivered like a real one (signed, with
        retries) but marked <code>livemode: false</code>. Never money.
      </p>
      <div class="form-row">
        <label>
          Amount
          <input
            name="amount"
            value={amount}
            inputMode="decimal"
            onInput={(e) => setAmount((e.target as HTMLInputElement).value)}
          />
        </label>
        <label>
          Asset
          <select
            name="asset"
            value={asset}
            onChange={(e) => setAsset((e.target as HTMLSelectElement).value as 'USDT' | 'TRX')}
          >
            {watch.asset_filter !== 'TRX' && <option value="USDT">USDT</option>}
            {watch.asset_filter !== 'USDT' && <option value="TRX">TRX</option>}
          </select>
        </label>
        <button type="submit" class="btn btn-primary" disabled={busy}>
          Trigger test deposit
        </button>
      </div>
    </form>
  );
}

export function ChannelPill({ channel }: { channel: 'webhook' | 'telegram' }) {
  return (
    <Pill tone={channel === 'webhook' ? 'blue' : 'gray'}>
      {channel === 'webhook' ? 'Webhook' : 'Telegram'}
    </Pill>
  );
}

function HealthCard({
  health,
  buckets,
  win,
  setWin,
  loading,
}: {
  health: WatchHealth;
  buckets: HealthBucket[];
  win: Win;
  setWin: (w: Win) => void;
  loading: boolean;
}) {
  return (
    <article class="card card-wide health-card" aria-labelledby="health-title">
      <h2 id="health-title" class="card-title">
        Endpoint health
      </h2>
      <div class="table-scroll">
        <table class="table health-table">
          <thead>
            <tr>
              <th scope="col">Window</th>
              <th scope="col">Success rate</th>
              <th scope="col">p50</th>
              <th scope="col">p95</th>
              <th scope="col">Attempts</th>
            </tr>
          </thead>
          <tbody>
            {WINDOWS.map(({ id, label }) => {
              const h = health[id];
              return (
                <tr key={id}>
                  <th scope="row">{label}</th>
                  <td data-label="Success rate">{rate(h.success_rate)}</td>
                  <td data-label="p50">{h.p50_ms === null ? '—' : durationMs(h.p50_ms)}</td>
                  <td data-label="p95">{h.p95_ms === null ? '—' : durationMs(h.p95_ms)}</td>
                  <td data-label="Attempts">
                    {h.succeeded} of {h.attempts}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      <p class="muted">
        Last success:{' '}
        {health.last_success_at ? <Time iso={health.last_success_at} rel /> : 'none yet'} ·{' '}
        {health.consecutive_failures === 0
          ? 'the newest attempt succeeded'
          : `${plural(health.consecutive_failures, 'failed attempt')} in a row`}
      </p>
      <fieldset class="segmented" aria-label="Chart window">
        {WINDOWS.map(({ id, label }) => (
          <button
            key={id}
            type="button"
            class={`btn btn-small ${win === id ? 'btn-primary' : 'btn-secondary'}`}
            aria-pressed={win === id}
            onClick={() => setWin(id)}
          >
            {label}
          </button>
        ))}
      </fieldset>
      <HealthChart buckets={buckets} loading={loading} />
    </article>
  );
}

/** Success rate (%) and p95 latency (ms) per bucket, drawn by uPlot (canvas). */
export function HealthChart({ buckets, loading }: { buckets: HealthBucket[]; loading: boolean }) {
  const el = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const box = el.current;
    if (!box) return;
    const xs = buckets.map((b) => Date.parse(b.start) / 1000);
    const rates = buckets.map((b) => (b.success_rate === null ? null : b.success_rate * 100));
    const p95 = buckets.map((b) => b.p95_ms);
    const width = () => Math.max(240, box.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 220,
        series: [
          {},
          { label: 'Success %', stroke: '#15803d', width: 2, scale: '%', spanGaps: false },
          { label: 'p95 ms', stroke: '#b45309', width: 2, scale: 'ms', spanGaps: false },
        ],
        scales: { '%': { range: [0, 100] } },
        axes: [
          {},
          { scale: '%', label: 'Success %', size: 50 },
          { scale: 'ms', side: 1, label: 'p95 ms', size: 60, grid: { show: false } },
        ],
      },
      [xs, rates, p95],
      box,
    );
    const ro = new ResizeObserver(() => plot.setSize({ width: width(), height: 220 }));
    ro.observe(box);
    return () => {
      ro.disconnect();
      plot.destroy();
    };
  }, [buckets]);
  const total = buckets.reduce((n, b) => n + b.attempts, 0);
  return (
    <figure class="health-chart">
      <div ref={el} data-testid="health-chart" aria-hidden="true" />
      <figcaption class="muted">
        {loading
          ? 'Loading…'
          : total === 0
            ? 'No delivery attempts in this window.'
            : `${total} attempts in this window; gaps are periods without attempts.`}
      </figcaption>
    </figure>
  );
}

function EditWatch({
  watch,
  onSaved,
  onRefused,
}: {
  watch: Watch;
  onSaved: (w: Watch) => void;
  /** The server refused for the role (it changed while the page was open): the sentence. */
  onRefused: (text: string) => void;
}) {
  const { explain } = useRole();
  const [label, setLabel] = useState(watch.label ?? '');
  const [url, setUrl] = useState(watch.webhook_url ?? '');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const [generic, setGeneric] = useState<string | null>(null);
  const urlProblem = url.length > 2048 ? urlTooLong(url.length) : undefined;
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setGeneric(null);
    if (urlProblem) return;
    setBusy(true);
    try {
      const body: Record<string, string | null> = { label: label.trim() === '' ? null : label };
      const own = watch.channel === 'webhook' && watch.endpoint_id === null;
      if (own && url.trim() !== watch.webhook_url) body.webhook_url = url.trim();
      onSaved(await patch<Watch>(`/watches/${encodeURIComponent(watch.id)}`, body));
    } catch (err) {
      if (isRoleRefusal(err)) onRefused(explain(err));
      else if (err instanceof ApiError && err.body.details?.length) setError(err);
      else setGeneric(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card form-card" onSubmit={submit} noValidate aria-labelledby="edit-title">
      <h2 id="edit-title" class="card-title">
        Edit
      </h2>
      <div aria-live="polite">{generic && <Notice tone="error">{generic}</Notice>}</div>
      <Field
        label="Label"
        hint="Your name for this watch, shown in every list. At most 100 characters; empty for none."
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
      {watch.channel === 'webhook' && watch.endpoint_id === null && (
        <Field
          label="Webhook URL"
          hint="A public https endpoint, at most 2,048 characters, checked as at creation. The secret stays the same."
          error={urlProblem ?? plainUrlError(error?.fieldError('webhook_url'))}
        >
          {({ id, describedBy }) => (
            <input
              id={id}
              type="url"
              aria-describedby={describedBy}
              aria-invalid={urlProblem || error?.fieldError('webhook_url') ? true : undefined}
              value={url}
              onInput={(e) => setUrl(e.currentTarget.value)}
            />
          )}
        </Field>
      )}
      <div class="form-actions">
        <button type="submit" class="btn btn-primary" disabled={busy}>
          {busy ? 'Saving…' : 'Save'}
        </button>
      </div>
    </form>
  );
}

/** The length error of a webhook URL (the limit stated in words, the value kept). */
export function urlTooLong(n: number): string {
  return `The URL has ${n.toLocaleString('en')} characters; at most 2,048 are allowed.`;
}

/** A server's webhook_url refusal in plain words where we know it; otherwise as given. */
export function plainUrlError(message: string | undefined): string | undefined {
  if (!message) return undefined;
  if (/scheme|https/i.test(message) && !/private|reserved/i.test(message)) {
    return 'The URL must start with https://.';
  }
  if (/credential|userinfo|user/i.test(message)) {
    return 'The URL must not contain a user name or password.';
  }
  if (/private|reserved|loopback|not public/i.test(message)) {
    return `The URL must point to a public address: ${message}.`;
  }
  if (/resolve|dns|ENOTFOUND/i.test(message)) {
    return `The host name does not resolve: ${message}.`;
  }
  return message;
}

const GRACE: { seconds: number; label: string }[] = [
  { seconds: 3600, label: '1 hour' },
  { seconds: 86400, label: '24 hours' },
  { seconds: 3 * 86400, label: '3 days' },
  { seconds: 7 * 86400, label: '7 days' },
  { seconds: 0, label: 'None: the old secret stops at once' },
];

function RotateSecret({
  watch,
  onRotated,
  onExpired,
  onRefused,
}: {
  watch: Watch;
  onRotated: (w: Watch, secret: string) => void;
  onExpired: (w: Watch) => void;
  /** The server refused for the role (it changed while the page was open): the sentence. */
  onRefused: (text: string) => void;
}) {
  const [grace, setGrace] = useState(86400);
  const [busy, setBusy] = useState(false);
  const [confirmEnd, setConfirmEnd] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const { explain } = useRole();
  const failed = (err: unknown) => {
    if (isRoleRefusal(err)) onRefused(explain(err));
    else setError(describeError(err));
  };
  const rotate = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const r = await post<Watch & { secret: string }>(
        `/watches/${encodeURIComponent(watch.id)}/rotate-secret`,
        { grace_period_seconds: grace },
      );
      const { secret, ...rest } = r;
      onRotated(rest, secret);
    } catch (err) {
      failed(err);
    } finally {
      setBusy(false);
    }
  };
  const expire = async () => {
    setConfirmEnd(false);
    setBusy(true);
    setError(null);
    try {
      onExpired(
        await post<Watch>(`/watches/${encodeURIComponent(watch.id)}/previous-secret/expire`),
      );
    } catch (err) {
      failed(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card form-card" onSubmit={rotate} aria-labelledby="rotate-title">
      <h2 id="rotate-title" class="card-title">
        Signing secret
      </h2>
      <div aria-live="polite">{error && <Notice tone="error">{error}</Notice>}</div>
      {watch.previous_secret_expires_at ? (
        <div class="grace">
          <p>
            <Pill tone="amber">Grace period</Pill> Both the new and the previous secret sign every
            delivery until <Time iso={watch.previous_secret_expires_at} />.
          </p>
          <button
            type="button"
            class="btn btn-secondary"
            disabled={busy}
            onClick={() => setConfirmEnd(true)}
          >
            End grace period now
          </button>
          {confirmEnd && (
            <ConfirmDialog
              title="End the grace period now?"
              confirmLabel="End grace period"
              danger
              onConfirm={expire}
              onCancel={() => setConfirmEnd(false)}
            >
              <p>
                The previous secret stops signing at once: from the next delivery on, only the new
                secret signs. An endpoint still verifying with the previous secret will reject every
                delivery until it uses the new one. This cannot be undone.
              </p>
            </ConfirmDialog>
          )}
        </div>
      ) : (
        <p class="muted">
          {watch.secret_rotated_at ? (
            <>
              Last rotated <Time iso={watch.secret_rotated_at} />.
            </>
          ) : (
            'The secret given at creation.'
          )}
        </p>
      )}
      <p>
        Rotating gives a new secret, shown once. During the grace period deliveries are signed with
        both, so your endpoint keeps verifying with the old secret until you deploy the new one.
      </p>
      <Field label="Grace period">
        {({ id }) => (
          <select id={id} value={grace} onChange={(e) => setGrace(Number(e.currentTarget.value))}>
            {GRACE.map((g) => (
              <option key={g.seconds} value={g.seconds}>
                {g.label}
              </option>
            ))}
          </select>
        )}
      </Field>
      <div class="form-actions">
        <button type="submit" class="btn btn-primary" disabled={busy}>
          {busy ? 'Rotating…' : 'Rotate secret'}
        </button>
      </div>
    </form>
  );
}

/** The signing secret's rotation state in words, for those who cannot rotate it. */
function SecretState({ watch }: { watch: Watch }) {
  if (watch.previous_secret_expires_at) {
    return (
      <>
        Rotated; the previous secret signs too until <Time iso={watch.previous_secret_expires_at} />
      </>
    );
  }
  if (watch.secret_rotated_at) {
    return (
      <>
        Last rotated <Time iso={watch.secret_rotated_at} />
      </>
    );
  }
  return <>The secret given at creation</>;
}
