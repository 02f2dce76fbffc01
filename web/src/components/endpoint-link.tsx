/** How the console names an endpoint where a watch points at it (issue 40 item 2). */
import { BASE, Link } from '../router';
import type { EndpointName } from '../types';

/**
 * The endpoint a watch delivers to, by its label (else its URL's host and path), linking its
 * page (issue 40 item 2); its id only when the name cannot be read.
 */
export function EndpointLink({ id, endpoint }: { id: string; endpoint: EndpointName | null }) {
  const name = endpoint ? endpointName(endpoint) : id;
  return (
    <span>
      endpoint{' '}
      <Link href={`${BASE}/endpoints/${encodeURIComponent(id)}`} title={endpoint?.url ?? id}>
        {name}
      </Link>
      {endpoint && !endpoint.enabled && <span class="muted"> (paused)</span>}
    </span>
  );
}

/** An endpoint's name for people: its label, else its URL without the scheme. */
export function endpointName(e: { label: string | null; url: string }): string {
  return e.label ?? e.url.replace(/^https?:\/\//, '');
}
