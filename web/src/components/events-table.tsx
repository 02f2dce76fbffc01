/** The events list shared by Events and Dead letters: filters in the URL, cursor paging. */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { API, describeError, get, query } from '../api';
import { heldWords, isoToLocalInput, localInputToIso, middle } from '../format';
import { useLoad } from '../hooks';
import { type LiveMode, useLive } from '../live';
import { useRole } from '../roles';
import { BASE, Link, navigate, useLocation } from '../router';
import type { DeliveryStatus, EventPage, EventWithDelivery, WatchListed } from '../types';
import { EmptyState, Loading, Mono, Notice, Pill, StatusPill, Time } from './ui';

export const PAGE_SIZE = 50;

export interface Filters {
  /** A transaction id, an event id or an address (the search box). */
  q: string;
  watch_id: string;
  status: '' | DeliveryStatus;
  asset: '' | 'USDT' | 'TRX';
  direction: '' | 'incoming' | 'outgoing';
  channel: '' | 'webhook' | 'telegram';
  /** How the transfer was established (SPEC §Event `proof`). */
  proof: '' | 'signed' | 'quorum' | 'provider';
  /** Only held deliveries (`true`) or none held (`false`): issue 36 item 5. */
  held: '' | 'true' | 'false';
  since: string;
  until: string;
  /** The page's cursor: older than `before`, or newer than `after` (at most one). */
  before: string;
  after: string;
}

const PROOFS = ['signed', 'quorum', 'provider'] as const;

function oneOf<T extends string>(v: string | null, allowed: readonly T[]): T | '' {
  return v !== null && (allowed as readonly string[]).includes(v) ? (v as T) : '';
}

export function readFilters(search: URLSearchParams): Filters {
  return {
    q: search.get('q') ?? '',
    watch_id: search.get('watch_id') ?? '',
    status: oneOf(search.get('status'), ['PENDING', 'DELIVERED', 'DEAD'] as const),
    asset: oneOf(search.get('asset'), ['USDT', 'TRX'] as const),
    direction: oneOf(search.get('direction'), ['incoming', 'outgoing'] as const),
    channel: oneOf(search.get('channel'), ['webhook', 'telegram'] as const),
    proof: oneOf(search.get('proof'), PROOFS),
    held: oneOf(search.get('held'), ['true', 'false'] as const),
    since: search.get('since') ?? '',
    until: search.get('until') ?? '',
    before: search.get('before') ?? '',
    after: search.get('after') ?? '',
  };
}

/** The filters as query parameters, without the page's cursor. */
export function filterParams(f: Filters, fixedStatus?: DeliveryStatus) {
  return {
    q: f.q.trim(),
    watch_id: f.watch_id,
    status: fixedStatus ?? f.status,
    asset: f.asset,
    direction: f.direction,
    channel: f.channel,
    proof: f.proof,
    held: f.held,
    since: f.since,
    until: f.until,
  };
}

/** Whether any filter (not the cursor) is set. */
export function isFiltered(f: Filters): boolean {
  return Boolean(
    f.q ||
      f.watch_id ||
      f.status ||
      f.asset ||
      f.direction ||
      f.channel ||
      f.proof ||
      f.held ||
      f.since ||
      f.until,
  );
}

export function useWatches() {
  return useLoad(() => get<{ data: WatchListed[] }>('/watches').then((r) => r.data), []);
}

/** A watch's label, when it has one (an additive field of newer servers). */
export function watchLabel(w: WatchListed): string | null {
  const l = (w as { label?: unknown }).label;
  return typeof l === 'string' && l.trim() !== '' ? l : null;
}

/** Where a watch delivers, in a few words: "Telegram chat" or the webhook's host and path. */
export function watchTarget(w: WatchListed): string {
  if (w.channel === 'telegram') return 'Telegram chat';
  try {
    const u = new URL(w.webhook_url ?? '');
    return `${u.host}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return w.webhook_url ?? 'webhook';
  }
}

/** One line naming a watch in pickers: label, channel and target, then what it watches. */
export function watchOptionText(w: WatchListed): string {
  const label = watchLabel(w);
  const channel = w.channel === 'telegram' ? 'Telegram' : 'Webhook';
  const target = w.channel === 'telegram' ? 'chat' : watchTarget(w);
  return [label, `${channel} ${target}`, `${middle(w.address, 6)} ${w.asset_filter} ${w.direction}`]
    .filter((x) => x !== null)
    .join(' · ');
}

/** The search box's shapes (as the server's parseEventSearch): a message when it is none. */
export function searchProblem(q: string): string | undefined {
  const t = q.trim();
  if (t === '') return undefined;
  if (/^evt_[0-9A-Za-z_-]{1,60}$/.test(t)) return undefined;
  if (/^(0x)?[0-9a-fA-F]{64}$/.test(t)) return undefined;
  if (/^T[1-9A-HJ-NP-Za-km-z]{33}$/.test(t)) return undefined;
  return 'Search for a transaction id (64 hex characters), an event id (evt_…) or a TRON address (34 characters, starts with T).';
}

/**
 * A watch picker with search: a search box that narrows the list below it by label, channel,
 * target, address, asset or direction; the list is a plain select (keyboard and screen readers
 * know it).
 */
function WatchPicker({
  watches,
  value,
  onChange,
}: {
  watches: WatchListed[] | undefined;
  value: string;
  onChange: (id: string) => void;
}) {
  const [find, setFind] = useState('');
  const needle = find.trim().toLowerCase();
  const shown =
    watches?.filter(
      (w) =>
        w.id === value ||
        needle === '' ||
        `${watchOptionText(w)} ${w.address} ${w.webhook_url ?? ''} ${w.id}`
          .toLowerCase()
          .includes(needle),
    ) ?? [];
  const count = watches?.length ?? 0;
  return (
    <fieldset class="field watch-picker">
      <legend>Watch</legend>
      {count > 1 && (
        <input
          type="search"
          aria-label="Find a watch"
          placeholder="Find a watch: label, URL, address…"
          value={find}
          onInput={(e) => setFind(e.currentTarget.value)}
        />
      )}
      <select
        id="f-watch"
        aria-label="Watch"
        value={value}
        onChange={(e) => onChange(e.currentTarget.value)}
      >
        <option value="">
          {needle !== '' && count > 0
            ? `All watches (${shown.length} of ${count} match)`
            : 'All watches'}
        </option>
        {shown.map((w) => (
          <option key={w.id} value={w.id}>
            {watchOptionText(w)}
          </option>
        ))}
        {value && !watches?.some((w) => w.id === value) && <option value={value}>{value}</option>}
      </select>
    </fieldset>
  );
}

/**
 * The filter form; applying it changes the URL (so a filtered view can be bookmarked and shared),
 * and starts again from the newest page.
 */
export function FilterForm({
  filters,
  watches,
  showStatus,
  basePath,
}: {
  filters: Filters;
  watches: WatchListed[] | undefined;
  showStatus: boolean;
  basePath: string;
}) {
  const [f, setF] = useState(filters);
  const [errors, setErrors] = useState<{ q?: string; since?: string }>({});
  const key = JSON.stringify(filterParams(filters));
  useEffect(() => {
    setF(filters);
    setErrors({});
  }, [key]);
  const apply = (e: Event) => {
    e.preventDefault();
    const problems: { q?: string; since?: string } = {};
    const sp = searchProblem(f.q);
    if (sp) problems.q = sp;
    if (f.since && f.until && Date.parse(f.since) > Date.parse(f.until)) {
      problems.since = '"From" is after "To": choose a start before the end.';
    }
    setErrors(problems);
    if (problems.q || problems.since) return;
    const p = filterParams(f);
    navigate(basePath + query({ ...p, status: showStatus ? p.status : undefined }));
  };
  const active = isFiltered(filters);
  const set = (patch: Partial<Filters>) => setF({ ...f, ...patch });
  return (
    <form class="filters" onSubmit={apply} aria-label="Filter events" noValidate>
      <div class={`field filters-search${errors.q ? ' field-invalid' : ''}`}>
        <label for="f-q">Search</label>
        <input
          id="f-q"
          type="search"
          class="mono-input"
          placeholder="Transaction id, event id (evt_…) or address (T…)"
          autoComplete="off"
          spellcheck={false}
          value={f.q}
          aria-invalid={errors.q ? true : undefined}
          aria-describedby={errors.q ? 'f-q-err' : undefined}
          onInput={(e) => set({ q: e.currentTarget.value })}
        />
        {errors.q && (
          <p class="field-error" id="f-q-err">
            {errors.q}
          </p>
        )}
      </div>
      <WatchPicker watches={watches} value={f.watch_id} onChange={(id) => set({ watch_id: id })} />
      {showStatus && (
        <div class="field">
          <label for="f-status">Delivery status</label>
          <select
            id="f-status"
            value={f.status}
            onChange={(e) =>
              set({
                status: readFilters(new URLSearchParams({ status: e.currentTarget.value })).status,
              })
            }
          >
            <option value="">Any status</option>
            <option value="PENDING">Pending</option>
            <option value="DELIVERED">Delivered</option>
            <option value="DEAD">Dead</option>
          </select>
        </div>
      )}
      <div class="field">
        <label for="f-asset">Asset</label>
        <select
          id="f-asset"
          value={f.asset}
          onChange={(e) => set({ asset: oneOf(e.currentTarget.value, ['USDT', 'TRX'] as const) })}
        >
          <option value="">Any asset</option>
          <option value="USDT">USDT</option>
          <option value="TRX">TRX</option>
        </select>
      </div>
      <div class="field">
        <label for="f-proof">Proof</label>
        <select
          id="f-proof"
          value={f.proof}
          title="How the transfer was established"
          onChange={(e) => set({ proof: oneOf(e.currentTarget.value, PROOFS) })}
        >
          <option value="">Any proof</option>
          <option value="signed">Signed</option>
          <option value="quorum">Quorum</option>
          <option value="provider">One provider</option>
        </select>
      </div>
      <div class="field">
        <label for="f-held">Hold</label>
        <select
          id="f-held"
          value={f.held}
          title="Deliveries held until a second node provider confirms the transfer"
          onChange={(e) => set({ held: oneOf(e.currentTarget.value, ['true', 'false'] as const) })}
        >
          <option value="">Held or not</option>
          <option value="true">Held only</option>
          <option value="false">Not held</option>
        </select>
      </div>
      <div class="field">
        <label for="f-direction">Direction</label>
        <select
          id="f-direction"
          value={f.direction}
          onChange={(e) =>
            set({ direction: oneOf(e.currentTarget.value, ['incoming', 'outgoing'] as const) })
          }
        >
          <option value="">Both directions</option>
          <option value="incoming">Incoming</option>
          <option value="outgoing">Outgoing</option>
        </select>
      </div>
      <div class="field">
        <label for="f-channel">Channel</label>
        <select
          id="f-channel"
          value={f.channel}
          onChange={(e) =>
            set({ channel: oneOf(e.currentTarget.value, ['webhook', 'telegram'] as const) })
          }
        >
          <option value="">Any channel</option>
          <option value="webhook">Webhook</option>
          <option value="telegram">Telegram</option>
        </select>
      </div>
      <div class={`field${errors.since ? ' field-invalid' : ''}`}>
        <label for="f-since">From (your time)</label>
        <input
          id="f-since"
          type="datetime-local"
          value={f.since ? isoToLocalInput(f.since) : ''}
          aria-invalid={errors.since ? true : undefined}
          aria-describedby={errors.since ? 'f-since-err' : undefined}
          onInput={(e) => set({ since: localInputToIso(e.currentTarget.value) })}
        />
        {errors.since && (
          <p class="field-error" id="f-since-err">
            {errors.since}
          </p>
        )}
      </div>
      <div class="field">
        <label for="f-until">To (your time)</label>
        <input
          id="f-until"
          type="datetime-local"
          value={f.until ? isoToLocalInput(f.until) : ''}
          onInput={(e) => set({ until: localInputToIso(e.currentTarget.value) })}
        />
      </div>
      <div class="filters-actions">
        <button type="submit" class="btn btn-primary">
          Apply filters
        </button>
        {active && (
          <button type="button" class="btn btn-secondary" onClick={() => navigate(basePath)}>
            Clear
          </button>
        )}
      </div>
    </form>
  );
}

/**
 * One page of events for `filters` and the URL's cursor, reloaded (keeping the rows on screen)
 * whenever the live stream says one of them, or the first page, changed.
 */
export function useEventPage(filters: Filters, fixedStatus?: DeliveryStatus) {
  const params = filterParams(filters, fixedStatus);
  const key = JSON.stringify([params, filters.before, filters.after]);
  const page = useLoad(
    () =>
      get<EventPage>(
        `/events${query({ limit: PAGE_SIZE, ...params, before: filters.before, after: filters.after })}`,
      ),
    [key],
  );
  const live = useLive((c) => {
    const rows = page.data?.data ?? [];
    const firstPage = filters.before === '' && filters.after === '';
    if (
      c === null ||
      (c.new_events && firstPage) ||
      // Dead letters: a row leaves when its redelivery starts, another arrives when it dies.
      (fixedStatus !== undefined && (c.event_ids.length > 0 || c.new_events)) ||
      c.event_ids.some((id) => rows.some((r) => r.event_id === id))
    ) {
      void page.reload();
    }
  });
  const rows = page.data?.data ?? [];
  const setRows = (r: EventWithDelivery[]) => {
    if (page.data) page.setData({ ...page.data, data: r });
  };
  return { page, rows, live, setRows };
}

/** Export links: the whole filtered list (every page), streamed by the server. */
export function ExportLinks({
  filters,
  fixedStatus,
}: {
  filters: Filters;
  fixedStatus?: DeliveryStatus;
}) {
  const p = filterParams(filters, fixedStatus);
  return (
    <span class="export-links">
      <a
        class="btn btn-secondary btn-small"
        href={`${API}/events/export${query({ format: 'csv', ...p })}`}
        download
      >
        Export CSV
      </a>
      <a
        class="btn btn-secondary btn-small"
        href={`${API}/events/export${query({ format: 'json', ...p })}`}
        download
      >
        Export JSON
      </a>
    </span>
  );
}

export function EventsTable({
  rows,
  watches,
  action,
}: {
  rows: EventWithDelivery[];
  watches: WatchListed[] | undefined;
  action?: (e: EventWithDelivery) => ComponentChildren;
}) {
  const byId = new Map(watches?.map((w) => [w.id, w]) ?? []);
  return (
    <table class="table">
      <thead>
        <tr>
          <th scope="col">Block time</th>
          <th scope="col">Amount</th>
          <th scope="col">From → To</th>
          <th scope="col">Watch</th>
          <th scope="col">Delivery</th>
          {action && (
            <th scope="col">
              <span class="sr-only">Actions</span>
            </th>
          )}
        </tr>
      </thead>
      <tbody>
        {rows.map((e) => {
          const w = byId.get(e.watch_id);
          return (
            <tr key={`${e.event_id}`}>
              <td data-label="Block time">
                <Link href={`${BASE}/events/${encodeURIComponent(e.event_id)}`} class="row-link">
                  <Time iso={e.block_timestamp} short />
                </Link>
                <div class="sub mono" title={e.event_id}>
                  {middle(e.event_id, 8)}
                </div>
              </td>
              <td data-label="Amount">
                <span class={`amount dir-${e.direction}`}>
                  <span aria-hidden="true">{e.direction === 'incoming' ? '↓' : '↑'}</span>
                  <span class="sr-only">{e.direction}</span> {e.amount}{' '}
                  <span class="asset">{e.asset}</span>
                </span>
                <div class={`sub proof proof-${e.proof}`} title="How the transfer was established">
                  {e.proof}
                </div>
              </td>
              <td data-label="From → To">
                <div class="addr-pair">
                  <Mono value={e.from} copy={false} />
                  <span aria-hidden="true">→</span>
                  <span class="sr-only">to</span>
                  <Mono value={e.to} copy={false} />
                </div>
              </td>
              <td data-label="Watch">
                {w ? (
                  <span title={e.watch_id} class="watch-cell">
                    {watchLabel(w) && <span class="watch-label">{watchLabel(w)}</span>}
                    <code class="mono">{middle(w.address, 5)}</code>{' '}
                    <span class="muted">
                      {w.asset_filter} · {w.channel === 'telegram' ? 'Telegram' : 'Webhook'}
                    </span>
                  </span>
                ) : (
                  <Mono value={e.watch_id} copy={false} />
                )}
              </td>
              <td data-label="Delivery">
                {e.delivery === null ? (
                  <span class="muted">none</span>
                ) : (
                  <span class="delivery-cell">
                    <StatusPill status={e.delivery.status} />
                    {e.delivery.held && (
                      <span title={heldWords(e.delivery.held.reason)}>
                        <Pill tone="amber">Held</Pill>
                      </span>
                    )}
                    <span class="muted">
                      {e.delivery.attempts} {e.delivery.attempts === 1 ? 'attempt' : 'attempts'}
                    </span>
                  </span>
                )}
              </td>
              {action && <td data-label="Actions">{action(e)}</td>}
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** Everything under the filters: the table, its empty state, paging both ways, export. */
export function EventsListBody({
  pages,
  filters,
  basePath,
  watches,
  empty,
  action,
  fixedStatus,
}: {
  pages: ReturnType<typeof useEventPage>;
  filters: Filters;
  basePath: string;
  watches: WatchListed[] | undefined;
  empty: ComponentChildren;
  action?: (e: EventWithDelivery) => ComponentChildren;
  fixedStatus?: DeliveryStatus;
}) {
  const { page, rows, live } = pages;
  const p = filterParams(filters);
  const here = { ...p, status: fixedStatus ? undefined : p.status };
  if (page.error !== undefined && page.data === undefined) {
    return (
      <Notice tone="error">
        Could not load events: {describeError(page.error)}{' '}
        <button type="button" class="btn btn-link" onClick={() => void page.reload()}>
          Retry
        </button>
      </Notice>
    );
  }
  if (page.data === undefined) return <Loading label="Loading events…" />;
  const { next_before, next_after } = page.data;
  const pager = (
    <nav class="pager" aria-label="Pages">
      {next_after !== null && (
        <Link class="btn btn-secondary" href={basePath + query({ ...here, after: next_after })}>
          ← Newer
        </Link>
      )}
      {(filters.before || filters.after) && (
        <Link class="btn btn-link" href={basePath + query(here)}>
          Newest
        </Link>
      )}
      {next_before !== null && (
        <Link class="btn btn-secondary" href={basePath + query({ ...here, before: next_before })}>
          Older →
        </Link>
      )}
    </nav>
  );
  return (
    <>
      <div class="list-bar">
        <p class="muted" aria-live="polite">
          {rows.length === 0
            ? 'No events on this page.'
            : `${rows.length} ${rows.length === 1 ? 'event' : 'events'}${
                next_before === null && next_after === null ? ' (all)' : ''
              }, newest first.`}{' '}
          <LiveBadge mode={live} />
        </p>
        {rows.length > 0 && <ExportLinks filters={filters} fixedStatus={fixedStatus} />}
      </div>
      {page.error !== undefined && (
        <Notice tone="error">Could not refresh the list: {describeError(page.error)}</Notice>
      )}
      {rows.length === 0 ? empty : <EventsTable rows={rows} watches={watches} action={action} />}
      {pager}
    </>
  );
}

/** Whether the page follows deliveries live or by polling. */
export function LiveBadge({ mode }: { mode: LiveMode }) {
  if (mode === 'live') return <span class="live-badge">● Live</span>;
  if (mode === 'polling') return <span class="live-badge live-polling">Updates every 5 s</span>;
  return null;
}

export function useFilters(): Filters {
  const { search } = useLocation();
  return readFilters(search);
}

export function NoEvents({ filtered }: { filtered: boolean }) {
  // Test sends need the developer role (src/console/routes/watches.ts): not suggested below it.
  const { can } = useRole();
  return filtered ? (
    <EmptyState title="No events match these filters">
      <p>Widen the time range or choose another watch.</p>
    </EmptyState>
  ) : (
    <EmptyState title="No events yet">
      <p>
        An event appears here about a minute after a transfer to or from a watched address is
        confirmed. <Link href={`${BASE}/watches`}>Check your watches</Link>
        {can('developer')
          ? ', or send a test event from there to see what your endpoint receives.'
          : '.'}
      </p>
    </EmptyState>
  );
}
