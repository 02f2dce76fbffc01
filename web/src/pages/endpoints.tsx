/**
 * Endpoints (issue 30 item 4): one receiver — URL, secret, pace, on/off — shared by many watches.
 * Create (the secret shown once), switch off and on, rotate the secret, delete (refused while
 * watches target it), see its delivery health and the watches on it; and import watches in bulk
 * from a CSV file onto an endpoint, with a preview of what will be created before anything is.
 * Changes need the developer role (src/console/routes/endpoints.ts); below it the page only reads.
 */
import { useState } from 'preact/hooks';
import { ApiError, del, describeError, get, patch, post } from '../api';
import {
  ConfirmDialog,
  EmptyState,
  Field,
  Loading,
  Notice,
  PageHeader,
  Pill,
  SecretOnce,
  Time,
} from '../components/ui';
import { useLoad } from '../hooks';
import { RoleNote, useRole } from '../roles';
import { BASE, Link } from '../router';
import type { Endpoint, EndpointWithHealth, Watch } from '../types';

type Message = { tone: 'success' | 'error'; text: string } | null;

export function EndpointsPage() {
  const endpoints = useLoad(
    () => get<{ data: EndpointWithHealth[] }>('/endpoints').then((r) => r.data),
    [],
  );
  const [secret, setSecret] = useState<{ title: string; secret: string } | null>(null);
  const [message, setMessage] = useState<Message>(null);
  const [deleting, setDeleting] = useState<Endpoint | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const { role, can, explain } = useRole();
  const manages = can('developer');
  const list = endpoints.data;

  const replace = (e: Endpoint) =>
    endpoints.setData((list ?? []).map((x) => (x.id === e.id ? { ...x, ...e } : x)));

  const toggle = async (e: Endpoint) => {
    try {
      replace(await patch<Endpoint>(`/endpoints/${e.id}`, { enabled: !e.enabled }));
      setMessage({
        tone: 'success',
        text: e.enabled
          ? `${name(e)} is paused: its deliveries wait, no attempt used, until you resume it.`
          : `${name(e)} is resumed: waiting deliveries go out within a minute.`,
      });
    } catch (err) {
      setMessage({ tone: 'error', text: `Could not change ${name(e)}: ${explain(err)}` });
    }
  };

  const rotate = async (e: Endpoint) => {
    try {
      const r = await post<Endpoint & { secret: string }>(`/endpoints/${e.id}/rotate-secret`, {});
      replace(r);
      setSecret({ title: `New secret of ${name(e)}`, secret: r.secret });
      setMessage({
        tone: 'success',
        text: 'Both secrets sign every delivery for 24 hours: switch your receiver to the new one.',
      });
    } catch (err) {
      setMessage({ tone: 'error', text: `Could not rotate the secret: ${explain(err)}` });
    }
  };

  const remove = async (e: Endpoint) => {
    try {
      await del(`/endpoints/${e.id}`);
      endpoints.setData((list ?? []).filter((x) => x.id !== e.id));
      setMessage({ tone: 'success', text: `${name(e)} deleted.` });
    } catch (err) {
      setMessage({
        tone: 'error',
        text:
          err instanceof ApiError && err.code === 'endpoint_watches_active'
            ? `${name(e)} still has watches: delete them or move them to another endpoint first.`
            : `Could not delete ${name(e)}: ${explain(err)}`,
      });
    } finally {
      setDeleting(null);
    }
  };

  return (
    <section>
      <PageHeader
        title="Endpoints"
        description={
          <>
            One receiver for many watches: its URL, one secret that signs every delivery, and the
            pace it can take. Give watches its id as <code>endpoint_id</code>.
          </>
        }
      />
      <div aria-live="polite">
        {message && (
          <Notice tone={message.tone} onDismiss={() => setMessage(null)}>
            {message.text}
          </Notice>
        )}
      </div>
      {secret && (
        <SecretOnce
          title={secret.title}
          secret={secret.secret}
          copyLabel="Copy secret"
          onDone={() => setSecret(null)}
        />
      )}
      {manages ? (
        <CreateEndpointForm
          first={list !== undefined && list.length === 0}
          onCreated={(e, s) => {
            endpoints.setData([{ ...e, day: null }, ...(list ?? [])]);
            setSecret({ title: `Secret of ${name(e)}`, secret: s });
          }}
          onError={(text) => setMessage({ tone: 'error', text })}
        />
      ) : (
        <RoleNote role={role} needed="developer" what="to create and change endpoints" />
      )}
      {endpoints.error !== undefined && (
        <Notice tone="error">Could not load endpoints: {describeError(endpoints.error)}</Notice>
      )}
      {list === undefined ? (
        endpoints.error === undefined && <Loading label="Loading endpoints…" />
      ) : list.length === 0 ? (
        <EmptyState title="No endpoints yet">
          <p>Create one above when many watches deliver to the same receiver.</p>
        </EmptyState>
      ) : (
        <table class="table">
          <thead>
            <tr>
              <th scope="col">Endpoint</th>
              <th scope="col">Pace</th>
              <th scope="col">Health (24 h)</th>
              <th scope="col">Watches</th>
              <th scope="col">State</th>
              {manages && (
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              )}
            </tr>
          </thead>
          <tbody>
            {list.map((e) => (
              <tr key={e.id}>
                <td data-label="Endpoint">
                  <strong>
                    <Link
                      href={`${BASE}/endpoints/${encodeURIComponent(e.id)}`}
                      aria-label={`Open endpoint ${name(e)}`}
                    >
                      {e.label ?? 'unlabelled'}
                    </Link>
                  </strong>
                  <div class="url" title={e.url}>
                    {e.url}
                  </div>
                  <code class="mono muted">{e.id}</code>
                </td>
                <td data-label="Pace">{pace(e)}</td>
                <td data-label="Health (24 h)">
                  <Health e={e} />
                </td>
                <td data-label="Watches">
                  <button
                    type="button"
                    class="btn btn-link"
                    aria-expanded={open === e.id}
                    onClick={() => setOpen(open === e.id ? null : e.id)}
                  >
                    {e.watch_count.toLocaleString('en')} watch{e.watch_count === 1 ? '' : 'es'}
                  </button>
                </td>
                <td data-label="State">
                  {e.enabled ? <Pill tone="green">ON</Pill> : <Pill tone="gray">PAUSED</Pill>}
                  {e.previous_secret_expires_at && (
                    <div class="muted">
                      old secret signs until <Time iso={e.previous_secret_expires_at} />
                    </div>
                  )}
                </td>
                {manages && (
                  <td data-label="Actions" class="actions">
                    <button
                      type="button"
                      class="btn btn-small"
                      aria-label={`${e.enabled ? 'Pause' : 'Resume'} ${name(e)}`}
                      onClick={() => void toggle(e)}
                    >
                      {e.enabled ? 'Pause' : 'Resume'}
                    </button>{' '}
                    <button
                      type="button"
                      class="btn btn-small"
                      aria-label={`Rotate the secret of ${name(e)}`}
                      onClick={() => void rotate(e)}
                    >
                      Rotate secret
                    </button>{' '}
                    <button
                      type="button"
                      class="btn btn-danger-outline btn-small"
                      aria-label={`Delete ${name(e)}`}
                      onClick={() => setDeleting(e)}
                    >
                      Delete
                    </button>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {open && <EndpointWatches id={open} />}
      {manages && list && list.length > 0 && (
        <CsvImport
          endpoints={list}
          onDone={(n) => {
            endpoints.reload();
            setMessage({ tone: 'success', text: `${n} watch${n === 1 ? '' : 'es'} created.` });
          }}
        />
      )}
      {deleting && (
        <ConfirmDialog
          title="Delete this endpoint?"
          confirmLabel="Delete endpoint"
          danger
          onConfirm={() => remove(deleting)}
          onCancel={() => setDeleting(null)}
        >
          <p>
            <strong>{name(deleting)}</strong> is deleted. This is refused while watches target it.
            Deliveries already created are still sent to it.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

function name(e: Endpoint): string {
  return e.label ?? e.url;
}

export function pace(e: Endpoint): string {
  const parts = [
    e.rate_limit_per_second !== null ? `${e.rate_limit_per_second}/s` : null,
    e.max_concurrency !== null ? `${e.max_concurrency} at once` : null,
  ].filter((p) => p !== null);
  return parts.length === 0 ? 'no limit' : parts.join(', ');
}

export function Health({ e }: { e: EndpointWithHealth }) {
  const h = e.day;
  const alert = e.health.alert;
  const failing = alert && (
    <div>
      <Pill tone="red">failing</Pill> {e.health.consecutive_failures.toLocaleString('en')} failed in
      a row since <Time iso={alert.since} rel />
    </div>
  );
  const paused = e.paused_reason && <div class="muted">Switched off: {e.paused_reason}</div>;
  if (!h || h.attempts === 0) {
    return (
      <span>
        {failing}
        {paused}
        {!failing && !paused && <span class="muted">no deliveries</span>}
      </span>
    );
  }
  const rate = h.succeeded / h.attempts;
  return (
    <span>
      {failing}
      {paused}
      <Pill tone={rate >= 0.99 ? 'green' : rate >= 0.9 ? 'amber' : 'red'}>
        {(rate * 100).toFixed(rate === 1 ? 0 : 1)}%
      </Pill>{' '}
      of {h.attempts.toLocaleString('en')}
      {h.last_success_at && (
        <div class="muted">
          last 2xx <Time iso={h.last_success_at} rel />
        </div>
      )}
    </span>
  );
}

export function EndpointWatches({ id }: { id: string }) {
  const watches = useLoad(
    () => get<{ data: Watch[]; total: number }>(`/endpoints/${id}/watches`),
    [id],
  );
  const d = watches.data;
  return (
    <section class="card" aria-labelledby="endpoint-watches-title">
      <h2 id="endpoint-watches-title" class="card-title">
        Watches on this endpoint
      </h2>
      {watches.error !== undefined && (
        <Notice tone="error">Could not load them: {describeError(watches.error)}</Notice>
      )}
      {d === undefined ? (
        watches.error === undefined && <Loading />
      ) : d.data.length === 0 ? (
        <p class="muted">None yet.</p>
      ) : (
        <>
          <ul class="plain-list">
            {d.data.map((w) => (
              <li key={w.id}>
                <Link href={`${BASE}/watches/${w.id}`}>{w.label ?? w.address}</Link>{' '}
                <span class="muted">
                  {w.asset_filter} {w.direction} · {w.status}
                </span>
              </li>
            ))}
          </ul>
          {d.total > d.data.length && (
            <p class="muted">
              The newest {d.data.length} of {d.total.toLocaleString('en')}.
            </p>
          )}
        </>
      )}
    </section>
  );
}

function CreateEndpointForm({
  first,
  onCreated,
  onError,
}: {
  first: boolean;
  onCreated: (e: Endpoint, secret: string) => void;
  onError: (text: string) => void;
}) {
  const { explain } = useRole();
  const [url, setUrl] = useState('');
  const [label, setLabel] = useState('');
  const [rate, setRate] = useState('');
  const [conc, setConc] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);

  const submit = async (ev: Event) => {
    ev.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const r = await post<Endpoint & { secret: string }>('/endpoints', {
        url: url.trim(),
        ...(label.trim() !== '' ? { label: label.trim() } : {}),
        ...(rate !== '' ? { rate_limit_per_second: Number(rate) } : {}),
        ...(conc !== '' ? { max_concurrency: Number(conc) } : {}),
      });
      const { secret, ...e } = r;
      onCreated(e, secret);
      setUrl('');
      setLabel('');
      setRate('');
      setConc('');
    } catch (err) {
      if (err instanceof ApiError && err.status === 400) setError(err);
      else onError(`Could not create the endpoint: ${explain(err)}`);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card form-card" onSubmit={submit} aria-labelledby="new-endpoint-title">
      <h2 id="new-endpoint-title" class="card-title">
        {first ? 'Create your first endpoint' : 'Create an endpoint'}
      </h2>
      <Field
        label="URL"
        hint="A public https endpoint that answers 2xx within 10 s."
        error={error?.fieldError('url')}
      >
        {({ id, describedBy }) => (
          <input
            id={id}
            type="url"
            required
            placeholder="https://pay.example.com/tron"
            aria-describedby={describedBy}
            value={url}
            onInput={(e) => setUrl(e.currentTarget.value)}
          />
        )}
      </Field>
      <div class="inline-fields">
        <Field label="Label (optional)" error={error?.fieldError('label')}>
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
        <Field
          label="Deliveries per second (optional)"
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
              value={rate}
              onInput={(e) => setRate(e.currentTarget.value)}
            />
          )}
        </Field>
        <Field
          label="At once (optional)"
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
          {busy ? 'Creating…' : 'Create endpoint'}
        </button>
      </div>
    </form>
  );
}

/** One row of the CSV, as it will be sent. */
interface CsvRow {
  line: number;
  address: string;
  asset_filter: string;
  direction: string;
  label: string;
  problem: string | null;
}

const ADDRESS_RE = /^(T[1-9A-HJ-NP-Za-km-z]{33}|41[0-9a-fA-F]{40})$/;
const MAX_ROWS = 1_000;

/**
 * Parse `address,asset_filter,direction,label` lines (a header line naming `address` is skipped;
 * only asset_filter and the rest are optional: USDT, incoming, none). Quotes are not needed for
 * these values; a quoted field is unquoted. Each row gets the console's own check.
 */
export function parseCsv(text: string): CsvRow[] {
  const rows: CsvRow[] = [];
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const cells = line.split(',').map((c) => c.trim().replace(/^"(.*)"$/, '$1'));
    if (i === 0 && cells[0]?.toLowerCase() === 'address') return;
    const [address = '', asset = 'USDT', direction = 'incoming', label = ''] = cells;
    const a = asset === '' ? 'USDT' : asset.toUpperCase();
    const d = direction === '' ? 'incoming' : direction.toLowerCase();
    let problem: string | null = null;
    if (!ADDRESS_RE.test(address)) problem = 'not a TRON address';
    else if (!['USDT', 'TRX', 'ALL'].includes(a)) problem = 'asset must be USDT, TRX or ALL';
    else if (!['incoming', 'outgoing', 'both'].includes(d))
      problem = 'direction must be incoming, outgoing or both';
    else if (label.length > 100) problem = 'label longer than 100 characters';
    rows.push({ line: i + 1, address, asset_filter: a, direction: d, label, problem });
  });
  return rows;
}

function CsvImport({
  endpoints,
  onDone,
}: {
  endpoints: Endpoint[];
  onDone: (created: number) => void;
}) {
  const { explain } = useRole();
  const [endpointId, setEndpointId] = useState(endpoints[0]?.id ?? '');
  const [text, setText] = useState('');
  const [rows, setRows] = useState<CsvRow[] | null>(null);
  const [busy, setBusy] = useState(false);
  const [results, setResults] = useState<Map<number, string> | null>(null);
  const [error, setError] = useState<string | null>(null);

  const valid = rows?.filter((r) => r.problem === null) ?? [];

  const preview = (ev: Event) => {
    ev.preventDefault();
    setResults(null);
    setError(null);
    const parsed = parseCsv(text);
    if (parsed.length > MAX_ROWS) {
      setError(
        `At most ${MAX_ROWS.toLocaleString('en')} rows at a time (this file has ${parsed.length}).`,
      );
      setRows(null);
      return;
    }
    setRows(parsed);
  };

  const create = async () => {
    setBusy(true);
    setError(null);
    try {
      const r = await post<{
        created: number;
        results: Array<{ index: number; status: number; error?: { error: string } }>;
      }>('/watches/batch', {
        items: valid.map((v) => ({
          address: v.address,
          asset_filter: v.asset_filter,
          direction: v.direction,
          endpoint_id: endpointId,
          ...(v.label !== '' ? { label: v.label } : {}),
        })),
      });
      const byLine = new Map<number, string>();
      for (const x of r.results) {
        const row = valid[x.index];
        if (row)
          byLine.set(row.line, x.status === 201 ? 'created' : (x.error?.error ?? String(x.status)));
      }
      setResults(byLine);
      onDone(r.created);
    } catch (err) {
      setError(`Could not import: ${explain(err)}`);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card form-card" onSubmit={preview} aria-labelledby="csv-title">
      <h2 id="csv-title" class="card-title">
        Import watches from CSV
      </h2>
      <p class="muted">
        One watch per line: <code>address,asset_filter,direction,label</code> (asset USDT, TRX or
        ALL; direction incoming, outgoing or both; only the address is required). Nothing is created
        before you confirm the preview.
      </p>
      <Field label="Endpoint">
        {({ id }) => (
          <select id={id} value={endpointId} onChange={(e) => setEndpointId(e.currentTarget.value)}>
            {endpoints.map((e) => (
              <option key={e.id} value={e.id}>
                {name(e)}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="CSV file">
        {({ id }) => (
          <input
            id={id}
            type="file"
            accept=".csv,text/csv,text/plain"
            onChange={async (e) => {
              const f = e.currentTarget.files?.[0];
              if (f) setText(await f.text());
            }}
          />
        )}
      </Field>
      <Field label="Or paste the lines">
        {({ id }) => (
          <textarea
            id={id}
            rows={5}
            class="mono"
            value={text}
            onInput={(e) => setText(e.currentTarget.value)}
          />
        )}
      </Field>
      {error && <Notice tone="error">{error}</Notice>}
      <div class="form-actions">
        <button type="submit" class="btn" disabled={text.trim() === ''}>
          Preview
        </button>
      </div>
      {rows && (
        <div>
          <p aria-live="polite">
            {valid.length.toLocaleString('en')} watch{valid.length === 1 ? '' : 'es'} will be
            created on{' '}
            <strong>
              {name(endpoints.find((e) => e.id === endpointId) ?? (endpoints[0] as Endpoint))}
            </strong>
            {rows.length > valid.length
              ? `; ${rows.length - valid.length} line${rows.length - valid.length === 1 ? '' : 's'} will be skipped.`
              : '.'}
          </p>
          <table class="table" aria-label="Preview">
            <thead>
              <tr>
                <th scope="col">Line</th>
                <th scope="col">Address</th>
                <th scope="col">Asset</th>
                <th scope="col">Direction</th>
                <th scope="col">Label</th>
                <th scope="col">Result</th>
              </tr>
            </thead>
            <tbody>
              {rows.slice(0, 200).map((r) => (
                <tr key={r.line}>
                  <td data-label="Line">{r.line}</td>
                  <td data-label="Address">
                    <code class="mono">{r.address}</code>
                  </td>
                  <td data-label="Asset">{r.asset_filter}</td>
                  <td data-label="Direction">{r.direction}</td>
                  <td data-label="Label">{r.label}</td>
                  <td data-label="Result">
                    {r.problem ? (
                      <Pill tone="red">skipped: {r.problem}</Pill>
                    ) : results?.has(r.line) ? (
                      results.get(r.line) === 'created' ? (
                        <Pill tone="green">created</Pill>
                      ) : (
                        <Pill tone="red">{results.get(r.line)}</Pill>
                      )
                    ) : (
                      <span class="muted">to create</span>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {rows.length > 200 && <p class="muted">The first 200 lines are shown.</p>}
          {results === null && (
            <div class="form-actions">
              <button
                type="button"
                class="btn btn-primary"
                disabled={busy || valid.length === 0}
                onClick={() => void create()}
              >
                {busy ? 'Creating…' : `Create ${valid.length.toLocaleString('en')} watches`}
              </button>
            </div>
          )}
        </div>
      )}
    </form>
  );
}
