/** The events list shared by Events and Dead letters: filters in the URL, cursor paging. */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { describeError, get, query } from '../api';
import { isoToLocalInput, localInputToIso, middle } from '../format';
import { useLoad } from '../hooks';
import { BASE, Link, navigate, useLocation } from '../router';
import type { DeliveryStatus, EventPage, EventWithDelivery, WatchListed } from '../types';
import { EmptyState, Loading, Mono, Notice, StatusPill, Time } from './ui';

export const PAGE_SIZE = 50;

export interface Filters {
  watch_id: string;
  status: '' | DeliveryStatus;
  since: string;
  until: string;
}

export function readFilters(search: URLSearchParams): Filters {
  const status = search.get('status') ?? '';
  return {
    watch_id: search.get('watch_id') ?? '',
    status: status === 'PENDING' || status === 'DELIVERED' || status === 'DEAD' ? status : '',
    since: search.get('since') ?? '',
    until: search.get('until') ?? '',
  };
}

export function useWatches() {
  return useLoad(() => get<{ data: WatchListed[] }>('/watches').then((r) => r.data), []);
}

/** The filter form; applying it changes the URL (so a filtered view can be bookmarked). */
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
  useEffect(() => setF(filters), [filters.watch_id, filters.status, filters.since, filters.until]);
  const apply = (e: Event) => {
    e.preventDefault();
    navigate(
      basePath +
        query({
          watch_id: f.watch_id,
          status: showStatus ? f.status : undefined,
          since: f.since,
          until: f.until,
        }),
    );
  };
  const active = filters.watch_id || filters.status || filters.since || filters.until;
  return (
    <form class="filters" onSubmit={apply} aria-label="Filter events">
      <div class="field">
        <label for="f-watch">Watch</label>
        <select
          id="f-watch"
          value={f.watch_id}
          onChange={(e) => setF({ ...f, watch_id: e.currentTarget.value })}
        >
          <option value="">All watches</option>
          {watches?.map((w) => (
            <option key={w.id} value={w.id}>
              {middle(w.address, 6)} · {w.asset_filter} · {w.direction}
            </option>
          ))}
          {f.watch_id && !watches?.some((w) => w.id === f.watch_id) && (
            <option value={f.watch_id}>{f.watch_id}</option>
          )}
        </select>
      </div>
      {showStatus && (
        <div class="field">
          <label for="f-status">Delivery status</label>
          <select
            id="f-status"
            value={f.status}
            onChange={(e) =>
              setF({
                ...f,
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
        <label for="f-since">From (your time)</label>
        <input
          id="f-since"
          type="datetime-local"
          value={f.since ? isoToLocalInput(f.since) : ''}
          onInput={(e) => setF({ ...f, since: localInputToIso(e.currentTarget.value) })}
        />
      </div>
      <div class="field">
        <label for="f-until">To (your time)</label>
        <input
          id="f-until"
          type="datetime-local"
          value={f.until ? isoToLocalInput(f.until) : ''}
          onInput={(e) => setF({ ...f, until: localInputToIso(e.currentTarget.value) })}
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

/** Loads pages of events for `filters`; `older()` appends the next page. */
export function useEventPages(filters: Filters, fixedStatus?: DeliveryStatus) {
  const [rows, setRows] = useState<EventWithDelivery[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [olderBusy, setOlderBusy] = useState(false);
  const [olderError, setOlderError] = useState<unknown>(undefined);
  const params = {
    limit: PAGE_SIZE,
    watch_id: filters.watch_id,
    status: fixedStatus ?? filters.status,
    since: filters.since,
    until: filters.until,
  };
  const first = useLoad(async () => {
    const page = await get<EventPage>(`/events${query(params)}`);
    setRows(page.data);
    setNext(page.next_before);
    return page;
  }, [filters.watch_id, filters.status, filters.since, filters.until, fixedStatus]);
  const older = async () => {
    if (next === null) return;
    setOlderBusy(true);
    setOlderError(undefined);
    try {
      const page = await get<EventPage>(`/events${query({ ...params, before: next })}`);
      setRows((r) => [...r, ...page.data]);
      setNext(page.next_before);
    } catch (e) {
      setOlderError(e);
    } finally {
      setOlderBusy(false);
    }
  };
  return { rows, next, first, older, olderBusy, olderError, setRows };
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
                  <span title={e.watch_id}>
                    <code class="mono">{middle(w.address, 5)}</code>{' '}
                    <span class="muted">{w.asset_filter}</span>
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

/** Everything under the filters: the table, its empty state, the Older button. */
export function EventsListBody({
  pages,
  watches,
  empty,
  action,
}: {
  pages: ReturnType<typeof useEventPages>;
  watches: WatchListed[] | undefined;
  empty: ComponentChildren;
  action?: (e: EventWithDelivery) => ComponentChildren;
}) {
  const { rows, next, first, older, olderBusy, olderError } = pages;
  if (first.error !== undefined) {
    return (
      <Notice tone="error">
        Could not load events: {describeError(first.error)}{' '}
        <button type="button" class="btn btn-link" onClick={() => void first.reload()}>
          Retry
        </button>
      </Notice>
    );
  }
  if (first.data === undefined) return <Loading label="Loading events…" />;
  if (rows.length === 0) return <>{empty}</>;
  return (
    <>
      <p class="muted" aria-live="polite">
        Showing {rows.length} {rows.length === 1 ? 'event' : 'events'}
        {next === null ? ' (all)' : ''}, newest first.
      </p>
      <EventsTable rows={rows} watches={watches} action={action} />
      <div class="pager">
        {next !== null && (
          <button
            type="button"
            class="btn btn-secondary"
            disabled={olderBusy}
            onClick={() => void older()}
          >
            {olderBusy ? 'Loading…' : 'Older'}
          </button>
        )}
        {olderError !== undefined && (
          <Notice tone="error">Could not load older events: {describeError(olderError)}</Notice>
        )}
      </div>
    </>
  );
}

export function useFilters(): Filters {
  const { search } = useLocation();
  return readFilters(search);
}

export function NoEvents({ filtered }: { filtered: boolean }) {
  return filtered ? (
    <EmptyState title="No events match these filters">
      <p>Widen the time range or choose another watch.</p>
    </EmptyState>
  ) : (
    <EmptyState title="No events yet">
      <p>
        An event appears here about a minute after a transfer to or from a watched address is
        confirmed. <Link href={`${BASE}/watches`}>Check your watches</Link>, or send a test event
        from there to see what your endpoint receives.
      </p>
    </EmptyState>
  );
}
