/**
 * Events whose delivery is DEAD, each redeliverable, and "Redeliver all" for a scope. Both need
 * the developer role (src/console/routes/events.ts); below it the list is shown without them.
 */
import { useState } from 'preact/hooks';
import { get, post } from '../api';
import {
  EventsListBody,
  endpointName,
  FilterForm,
  TestModeEmpty,
  useEndpoints,
  useEventPage,
  useFilters,
  useWatches,
} from '../components/events-table';
import { ConfirmDialog, EmptyState, Notice, PageHeader } from '../components/ui';
import { localTime, middle, plural } from '../format';
import { RoleNote, useRole } from '../roles';
import { BASE, Link } from '../router';
import type { EventWithDelivery } from '../types';

export function DeadLettersPage() {
  const filters = useFilters();
  const watches = useWatches();
  const endpoints = useEndpoints();
  const pages = useEventPage(filters, 'DEAD');
  const basePath = `${BASE}/dead-letters`;
  /** The confirmation, with how many dead events the scope holds now (asked when opened). */
  const [confirming, setConfirming] = useState<{ count: number; limit: number } | null>(null);
  const [counting, setCounting] = useState(false);
  const [message, setMessage] = useState<{ tone: 'success' | 'error'; text: string } | null>(null);
  const [busyId, setBusyId] = useState<string | null>(null);
  const { role, can, explain } = useRole();
  const manages = can('developer');

  const watch = watches.data?.find((w) => w.id === filters.watch_id);
  const endpoint = endpoints.data?.find((e) => e.id === filters.endpoint_id);
  const scope = [
    watch ? `watch ${middle(watch.address, 6)} (${watch.asset_filter})` : 'all watches',
    filters.endpoint_id
      ? `delivering to endpoint ${endpoint ? endpointName(endpoint) : filters.endpoint_id}`
      : '',
    filters.since ? `from ${localTime(filters.since)}` : '',
    filters.until ? `to ${localTime(filters.until)}` : '',
    filters.q ? `matching “${filters.q}”` : '',
    filters.asset ? `${filters.asset} only` : '',
    filters.direction ? `${filters.direction} only` : '',
    filters.channel
      ? `${filters.channel === 'telegram' ? 'Telegram' : 'webhook'} watches only`
      : '',
  ]
    .filter((s) => s !== '')
    .join(', ');

  // Exactly what the filtered list shows (every page of it, not only this one).
  const scopeBody = {
    watch_id: filters.watch_id || undefined,
    endpoint_id: filters.endpoint_id || undefined,
    since: filters.since || undefined,
    until: filters.until || undefined,
    q: filters.q || undefined,
    asset: filters.asset || undefined,
    direction: filters.direction || undefined,
    channel: filters.channel || undefined,
  };

  /** Count the scope's dead events, then ask: the confirmation says how many. */
  const askRedeliverAll = async () => {
    setMessage(null);
    setCounting(true);
    try {
      const qs = new URLSearchParams(
        Object.entries(scopeBody).filter((kv): kv is [string, string] => kv[1] !== undefined),
      ).toString();
      const r = await get<{ count: number; limit: number }>(
        `/redeliver/count${qs ? `?${qs}` : ''}`,
      );
      if (r.count === 0) {
        setMessage({ tone: 'success', text: 'Nothing to redeliver: no dead event in this scope.' });
        await pages.page.reload();
      } else {
        setConfirming(r);
      }
    } catch (e) {
      setMessage({ tone: 'error', text: `Could not count the dead events: ${explain(e)}` });
    } finally {
      setCounting(false);
    }
  };

  const redeliverAll = async () => {
    setMessage(null);
    try {
      const r = await post<{ redelivered: number }>('/redeliver', scopeBody);
      setMessage({
        tone: 'success',
        text:
          r.redelivered === 0
            ? 'Nothing to redeliver: no dead event in this scope.'
            : `${r.redelivered} ${r.redelivered === 1 ? 'event' : 'events'} queued for redelivery. They leave this list as their new deliveries start.`,
      });
      await pages.page.reload();
    } catch (e) {
      setMessage({ tone: 'error', text: `Redeliver all failed: ${explain(e)}` });
    } finally {
      setConfirming(null);
    }
  };

  const redeliverOne = async (e: EventWithDelivery) => {
    setBusyId(e.event_id);
    setMessage(null);
    try {
      const r = await post<{ notification_id: string }>(
        `/events/${encodeURIComponent(e.event_id)}/redeliver`,
      );
      setMessage({
        tone: 'success',
        text: `Event ${middle(e.event_id, 8)} queued for redelivery (${r.notification_id}).`,
      });
      pages.setRows(pages.rows.filter((x) => x.event_id !== e.event_id));
    } catch (err) {
      setMessage({ tone: 'error', text: `Redelivery failed: ${explain(err)}` });
    } finally {
      setBusyId(null);
    }
  };

  return (
    <section>
      <PageHeader
        title="Dead letters"
        description="Events whose six delivery attempts all failed. Fix the endpoint, then redeliver: the same event_id and payload are sent again."
        actions={
          // Only when there is something to redeliver (an empty list offers nothing to do).
          manages &&
          pages.rows.length > 0 && (
            <button
              type="button"
              class="btn btn-primary"
              disabled={counting}
              onClick={() => void askRedeliverAll()}
            >
              {counting ? 'Counting…' : 'Redeliver all'}
            </button>
          )
        }
      />
      {!manages && <RoleNote role={role} needed="developer" what="to redeliver them" />}
      <div aria-live="polite">
        {message && (
          <Notice tone={message.tone} onDismiss={() => setMessage(null)}>
            {message.text}
          </Notice>
        )}
      </div>
      <FilterForm
        filters={filters}
        watches={watches.data}
        endpoints={endpoints.data}
        showStatus={false}
        basePath={basePath}
      />
      <EventsListBody
        pages={pages}
        filters={filters}
        basePath={basePath}
        fixedStatus="DEAD"
        watches={watches.data}
        empty={
          <TestModeEmpty
            title="No dead test events"
            lead="A test event lands here when all six attempts to deliver it fail."
          >
            <EmptyState title="No dead letters">
              <p>
                Every delivery in this view was acknowledged or is still being retried. Failed
                attempts are retried after 1 min, 5 min, 30 min, 2 h and 6 h before an event lands
                here. <Link href={`${BASE}/events?status=PENDING`}>See pending deliveries</Link>.
              </p>
            </EmptyState>
          </TestModeEmpty>
        }
        action={
          manages
            ? (e) => (
                <button
                  type="button"
                  class="btn btn-secondary btn-small"
                  disabled={busyId === e.event_id}
                  aria-label={`Redeliver event ${e.event_id}`}
                  onClick={() => void redeliverOne(e)}
                >
                  {busyId === e.event_id ? 'Redelivering…' : 'Redeliver'}
                </button>
              )
            : undefined
        }
      />
      {confirming && (
        <ConfirmDialog
          title={`Redeliver ${plural(confirming.count, 'dead event')}?`}
          confirmLabel={`Redeliver ${plural(confirming.count, 'event')}`}
          onConfirm={redeliverAll}
          onCancel={() => setConfirming(null)}
        >
          <p>
            {confirming.count >= confirming.limit
              ? `The oldest ${confirming.limit.toLocaleString('en')} dead events`
              : confirming.count === 1
                ? 'The one dead event'
                : `All ${confirming.count} dead events`}{' '}
            for <strong>{scope}</strong> get a new delivery, sent now and retried on the usual
            schedule. Your endpoint must deduplicate on <code>event_id</code>.
            {confirming.count >= confirming.limit &&
              ' More remain: run it again once these have started.'}
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}
