/**
 * URLs shown with care (issue 40 item 6): a receiver's URL often carries its own token in the
 * query string (`https://pay.example.com/tron?token=…`). Members below the developer role (who
 * may not change the URL either) see an endpoint's or a watch's URL with its query string and
 * fragment masked, as the alert channels are shown by their host only (src/console/routes/alerts.ts).
 * The path stays: it tells receivers apart and is what a viewer needs to recognise one.
 */
import { type Role, roleAtLeast } from '../accounts/users.js';

/** What replaces a masked query string or fragment. */
export const MASK = '•••';

/**
 * `url` with the value of its query string and fragment replaced by {@link MASK}
 * (`https://h/p?•••`); unchanged when it has neither. A string that is not a URL is masked after
 * its host-looking prefix (nothing after the first `?` or `#` is kept).
 */
export function maskUrl(url: string): string {
  const cut = url.search(/[?#]/);
  if (cut < 0) return url;
  return `${url.slice(0, cut)}${url[cut]}${MASK}`;
}

/** The URL as `role` may see it: whole from developer up, {@link maskUrl} below. */
export function urlForRole<T extends string | null>(url: T, role: Role): T {
  if (url === null || roleAtLeast(role, 'developer')) return url;
  return maskUrl(url) as T;
}
