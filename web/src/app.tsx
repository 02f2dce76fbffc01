/**
 * The shell: loads the config and the session, then either the sign-in pages or the app with
 * its left navigation. A 401 no_session from any call brings the login page back, and the route
 * the user was on is kept (it is still the URL).
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ApiError, describeError, get, onSignedOut, post } from './api';
import { Loading, Notice } from './components/ui';
import { takeStreamEndNotice } from './live';
import { AccountPage } from './pages/account';
import { AlertsPage } from './pages/alerts';
import { AuditPage } from './pages/audit';
import { ForgotPage, InvitePage, LoginPage, ResetPage, SignupPage } from './pages/auth';
import { DeadLettersPage } from './pages/dead-letters';
import { EndpointDetailPage } from './pages/endpoint-detail';
import { EndpointsPage } from './pages/endpoints';
import { EventDetailPage } from './pages/event-detail';
import { EventsPage } from './pages/events';
import { KeysPage } from './pages/keys';
import { MembersPage } from './pages/members';
import { OverviewPage } from './pages/overview';
import { SecurityPage } from './pages/security';
import { WatchDetailPage } from './pages/watch-detail';
import { AlertBanner, WatchesPage } from './pages/watches';
import { roleAtLeast } from './roles';
import { BASE, Link, navigate, useLocation } from './router';
import { AppContext, useApp } from './state';
import type { Config, Me, Role } from './types';

type Boot =
  | { state: 'loading' }
  | { state: 'failed'; error: unknown }
  | { state: 'ready'; config: Config; me: Me | null };

export function App() {
  const [boot, setBoot] = useState<Boot>({ state: 'loading' });
  // Why the server ended the live stream before this load (removed, signed out, a new role).
  const [endNotice] = useState(takeStreamEndNotice);

  const load = async () => {
    try {
      // The config call comes first: it sets the tw_csrf cookie every later POST needs, and
      // says whether a session is open, so a signed-out load asks nothing that answers 401.
      const config = await get<Config>('/config');
      const me =
        config.signed_in === false
          ? null
          : await get<Me>('/session').catch((e: unknown) => {
              if (e instanceof ApiError && e.status === 401) return null;
              throw e;
            });
      setBoot({ state: 'ready', config, me });
    } catch (e) {
      setBoot({ state: 'failed', error: e });
    }
  };

  useEffect(() => {
    void load();
    return onSignedOut(() => setBoot((b) => (b.state === 'ready' ? { ...b, me: null } : b)));
  }, []);

  if (boot.state === 'loading') return <Loading label="Loading the console…" />;
  if (boot.state === 'failed') {
    return (
      <main class="auth-page">
        <div class="auth-card">
          <h1>The console could not start</h1>
          <Notice tone="error">{describeError(boot.error)}</Notice>
          <button type="button" class="btn btn-primary" onClick={() => void load()}>
            Retry
          </button>
        </div>
      </main>
    );
  }
  const { config, me } = boot;
  const setMe = (m: Me | null) => setBoot({ state: 'ready', config, me: m });
  if (me === null || location.pathname === `${BASE}/reset`) {
    return (
      <SignedOut
        config={config}
        notice={endNotice}
        onSignedIn={(m) => {
          if (location.pathname === `${BASE}/reset`) navigate(`${BASE}/`, true);
          setMe(m);
        }}
      />
    );
  }
  return (
    <AppContext.Provider value={{ config, me, setMe }}>
      <Shell>
        {endNotice && <Notice tone="info">{endNotice}</Notice>}
        <Routes />
      </Shell>
    </AppContext.Provider>
  );
}

const AUTH_PATHS = new Set(['/login', '/signup', '/invite', '/forgot', '/reset']);

function SignedOut({
  config,
  onSignedIn,
  notice,
}: {
  config: Config;
  onSignedIn: (me: Me) => void;
  notice: string | null;
}) {
  const { path } = useLocation();
  const done = (me: Me) => {
    // After signing in from /login (or sign-up, invite) go to the overview; from any other
    // route (a deep link, an expired session) stay where the user was going.
    if (AUTH_PATHS.has(path)) navigate(`${BASE}/`, true);
    onSignedIn(me);
  };
  if (path === '/invite') return <InvitePage onSignedIn={done} />;
  if (path === '/forgot') return <ForgotPage config={config} />;
  if (path === '/reset') return <ResetPage onSignedIn={done} />;
  if (path === '/signup' && config.signup === 'open') return <SignupPage onSignedIn={done} />;
  return <LoginPage config={config} onSignedIn={done} notice={notice} />;
}

const NAV: { href: string; label: string; match: (p: string) => boolean; needs?: Role }[] = [
  { href: '/', label: 'Overview', match: (p) => p === '/' },
  { href: '/events', label: 'Events', match: (p) => p.startsWith('/events') },
  { href: '/dead-letters', label: 'Dead letters', match: (p) => p.startsWith('/dead-letters') },
  { href: '/watches', label: 'Watches', match: (p) => p.startsWith('/watches') },
  { href: '/endpoints', label: 'Endpoints', match: (p) => p.startsWith('/endpoints') },
  { href: '/keys', label: 'API keys', match: (p) => p.startsWith('/keys') },
  { href: '/members', label: 'Members', match: (p) => p.startsWith('/members') },
  { href: '/account', label: 'Account', match: (p) => p.startsWith('/account') },
  { href: '/security', label: 'Security', match: (p) => p.startsWith('/security') },
  // Alerts and the audit log are an admin's (the pages say so to others; no link is offered).
  { href: '/alerts', label: 'Alerts', match: (p) => p.startsWith('/alerts'), needs: 'admin' },
  { href: '/audit', label: 'Audit log', match: (p) => p.startsWith('/audit'), needs: 'admin' },
];

function Shell({ children }: { children: ComponentChildren }) {
  const { path } = useLocation();
  const { me } = useApp();
  const [menuOpen, setMenuOpen] = useState(false);
  const mainRef = useRef<HTMLElement>(null);
  const first = useRef(true);

  // On a route change: close the phone menu, move focus to the new page's heading (screen
  // readers announce it; keyboard users start from the top of the page).
  useEffect(() => {
    setMenuOpen(false);
    if (first.current) {
      first.current = false;
      return;
    }
    const h = mainRef.current?.querySelector<HTMLElement>('[data-page-title]');
    h?.focus();
  }, [path]);

  // Escape closes the phone menu and gives the focus back to its button. A layout effect: the
  // listener is in place when the open menu is painted, so an Escape pressed right after the
  // menu appears is not lost (a plain effect runs a frame later).
  useLayoutEffect(() => {
    if (!menuOpen) return undefined;
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape') return;
      setMenuOpen(false);
      document.querySelector<HTMLElement>('.menu-button')?.focus();
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, [menuOpen]);

  const signOut = async () => {
    try {
      await post('/logout');
    } finally {
      location.assign(`${BASE}/login`);
    }
  };

  return (
    <div class="layout">
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <Link href={`${BASE}/`} class="brand">
          <span class="brand-mark" aria-hidden="true">
            ▼
          </span>{' '}
          tronwatch
        </Link>
        <button
          type="button"
          class="btn btn-secondary menu-button"
          aria-expanded={menuOpen}
          aria-controls="sidenav"
          onClick={() => setMenuOpen(!menuOpen)}
        >
          Menu
        </button>
      </header>
      <nav id="sidenav" class={`sidenav${menuOpen ? ' open' : ''}`} aria-label="Console">
        <Link href={`${BASE}/`} class="brand brand-side">
          <span class="brand-mark" aria-hidden="true">
            ▼
          </span>{' '}
          tronwatch
        </Link>
        <ul>
          {NAV.filter((n) => !n.needs || roleAtLeast(me.user.role, n.needs)).map((n) => (
            <li key={n.href}>
              <Link
                href={BASE + n.href}
                aria-current={n.match(path) ? 'page' : undefined}
                class="nav-link"
              >
                {n.label}
              </Link>
            </li>
          ))}
          <li>
            <a href={`${BASE}/docs/`} class="nav-link">
              API docs
            </a>
          </li>
          <DevMailboxLink />
        </ul>
        <div class="nav-footer">
          <NetworkBadge />
          <button type="button" class="nav-signout" onClick={() => void signOut()}>
            Sign out
          </button>
        </div>
      </nav>
      <main id="main" class="main" ref={mainRef}>
        <EnvironmentSwitch />
        {!me.user.two_factor_setup_required && <AlertBanner path={path} />}
        {children}
      </main>
    </div>
  );
}

/** `tronwatch dev` only: the local mailbox capturing every e-mail the service sends. */
function DevMailboxLink() {
  const { config } = useApp();
  if (!config.dev_mailbox) return null;
  return (
    <li>
      <a href={config.dev_mailbox} class="nav-link" target="_blank" rel="noopener">
        E-mail (dev mailbox)
      </a>
    </li>
  );
}

function NetworkBadge() {
  const { config } = useApp();
  const test = config.environment === 'test';
  return (
    <span class={`network-badge${test ? ' network-badge-test' : ''}`}>
      TRON {test ? (config.test_network ?? 'nile') : config.network}
    </span>
  );
}

/**
 * The environment switch (issue 32), at the top of every page: live (real money, mainnet) or test
 * (test keys, test watches, triggered deposits: never money). Its position is the `tw_env`
 * cookie, which the server reads on every console request; switching reloads the page so that
 * nothing of the other environment stays on screen.
 */
function EnvironmentSwitch() {
  const { config } = useApp();
  const test = config.environment === 'test';
  const flip = () => {
    const next = test ? 'live' : 'test';
    // biome-ignore lint/suspicious/noDocumentCookie: one cookie, written where the server reads it (Cookie Store API is not in every browser the console supports).
    document.cookie = `tw_env=${next}; path=/console; SameSite=Lax; max-age=31536000`;
    location.reload();
  };
  return (
    <section class={`env-bar ${test ? 'env-bar-test' : 'env-bar-live'}`} aria-label="Environment">
      <span class="env-label">
        {test ? (
          <>
            <strong>TEST MODE</strong> · test data, no real money: keys, watches and events here
            never mix with live ones
          </>
        ) : (
          <>
            <strong>LIVE</strong> · mainnet, real money
          </>
        )}
      </span>
      <button type="button" role="switch" aria-checked={test} class="env-switch" onClick={flip}>
        Test mode
      </button>
    </section>
  );
}

function Routes() {
  const { path } = useLocation();
  const { me } = useApp();
  // The account requires a second factor this user has not set up: the server answers nothing
  // else (403 two_factor_setup_required), so the Security page is the only page until then.
  if (me.user.two_factor_setup_required) return <SecurityPage />;
  if (path === '/' || AUTH_PATHS.has(path)) return <OverviewPage />;
  if (path === '/events' || path === '/events/') return <EventsPage />;
  const ev = /^\/events\/([^/]+)\/?$/.exec(path);
  if (ev?.[1]) return <EventDetailPage eventId={decodeURIComponent(ev[1])} />;
  if (path.startsWith('/dead-letters')) return <DeadLettersPage />;
  const wh = /^\/watches\/([^/]+)\/?$/.exec(path);
  if (wh?.[1]) return <WatchDetailPage watchId={decodeURIComponent(wh[1])} />;
  if (path.startsWith('/watches')) return <WatchesPage />;
  const ep = /^\/endpoints\/([^/]+)\/?$/.exec(path);
  if (ep?.[1]) return <EndpointDetailPage endpointId={decodeURIComponent(ep[1])} />;
  if (path.startsWith('/endpoints')) return <EndpointsPage />;
  if (path.startsWith('/keys')) return <KeysPage />;
  if (path.startsWith('/members')) return <MembersPage />;
  if (path.startsWith('/account')) return <AccountPage />;
  if (path.startsWith('/security')) return <SecurityPage />;
  if (path.startsWith('/audit')) return <AuditPage />;
  if (path.startsWith('/alerts')) return <AlertsPage />;
  return (
    <section>
      <h1 tabIndex={-1} data-page-title>
        Page not found
      </h1>
      <p>
        There is nothing at this address. <Link href={`${BASE}/`}>Go to the overview</Link>.
      </p>
    </section>
  );
}
