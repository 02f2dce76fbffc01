import {
  EventsListBody,
  FilterForm,
  NoEvents,
  useEventPages,
  useFilters,
  useWatches,
} from '../components/events-table';
import { PageHeader } from '../components/ui';
import { BASE } from '../router';

export function EventsPage() {
  const filters = useFilters();
  const watches = useWatches();
  const pages = useEventPages(filters);
  const filtered = Boolean(filters.watch_id || filters.status || filters.since || filters.until);
  return (
    <section>
      <PageHeader
        title="Events"
        description="Every confirmed transfer that matched one of your watches, with its delivery state."
      />
      <FilterForm filters={filters} watches={watches.data} showStatus basePath={`${BASE}/events`} />
      <EventsListBody
        pages={pages}
        watches={watches.data}
        empty={<NoEvents filtered={filtered} />}
      />
    </section>
  );
}
