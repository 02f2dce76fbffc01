import {
  EventsListBody,
  FilterForm,
  isFiltered,
  NoEvents,
  useEndpoints,
  useEventPage,
  useFilters,
  useWatches,
} from '../components/events-table';
import { PageHeader } from '../components/ui';
import { BASE } from '../router';

export function EventsPage() {
  const filters = useFilters();
  const watches = useWatches();
  const endpoints = useEndpoints();
  const pages = useEventPage(filters);
  const basePath = `${BASE}/events`;
  return (
    <section>
      <PageHeader
        title="Events"
        description="Every confirmed transfer that matched one of your watches, with its delivery state. The list updates as deliveries land."
      />
      <FilterForm
        filters={filters}
        watches={watches.data}
        endpoints={endpoints.data}
        showStatus
        basePath={basePath}
      />
      <EventsListBody
        pages={pages}
        filters={filters}
        basePath={basePath}
        watches={watches.data}
        empty={<NoEvents filtered={isFiltered(filters)} />}
      />
    </section>
  );
}
