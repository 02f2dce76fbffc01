/**
 * A small history-API router for the console: paths under /console/, no hash. Links are real
 * <a href> elements (open in a new tab works); a plain left click is handled in place.
 */
import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';

export const BASE = '/console';

const listeners = new Set<() => void>();

function notify(): void {
  for (const fn of listeners) fn();
}

window.addEventListener('popstate', notify);

/** Go to `to` (a path under /console, query allowed). `replace` keeps the history entry. */
export function navigate(to: string, replace = false): void {
  if (to === location.pathname + location.search) return;
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  window.scrollTo(0, 0);
  notify();
}

export interface Location {
  /** The path after /console, always starting with '/': '/', '/events/evt_1'. */
  path: string;
  search: URLSearchParams;
}

function current(): Location {
  const p = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : '/';
  return { path: p === '' ? '/' : p, search: new URLSearchParams(location.search) };
}

export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const fn = () => setLoc(current());
    listeners.add(fn);
    return () => {
      listeners.delete(fn);
    };
  }, []);
  return loc;
}

type LinkProps = Omit<JSX.HTMLAttributes<HTMLAnchorElement>, 'href'> & {
  href: string;
  children: ComponentChildren;
};

/** An in-app link: `href` is a full path (/console/…). */
export function Link({ href, children, onClick, ...rest }: LinkProps) {
  return (
    <a
      href={href}
      onClick={(e) => {
        if (onClick) onClick(e);
        if (
          e.defaultPrevented ||
          e.button !== 0 ||
          e.metaKey ||
          e.ctrlKey ||
          e.shiftKey ||
          e.altKey
        )
          return;
        e.preventDefault();
        navigate(href);
      }}
      {...rest}
    >
      {children}
    </a>
  );
}
