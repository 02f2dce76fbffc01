/** Signed-out pages: log in, sign up (when open), accept an invite (set a password). */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, describeError, post } from '../api';
import { Field, NEW_PASSWORD_HINT, Notice, PasswordField } from '../components/ui';
import { BASE, Link } from '../router';
import type { Config, Me } from '../types';

function AuthFrame({ title, children }: { title: string; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · tronwatch`;
  }, [title]);
  return (
    <main class="auth-page">
      <div class="auth-card">
        <p class="brand auth-brand">
          <span class="brand-mark" aria-hidden="true">
            ▼
          </span>{' '}
          tronwatch
        </p>
        <h1>{title}</h1>
        {children}
      </div>
    </main>
  );
}

/** `14:59` (minutes and seconds) of a wait in seconds. */
function countdown(total: number): string {
  const m = Math.floor(total / 60);
  const sec = total % 60;
  return `${m}:${String(sec).padStart(2, '0')}`;
}

export function LoginPage({
  config,
  onSignedIn,
}: {
  config: Config;
  onSignedIn: (me: Me) => void;
}) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [warning, setWarning] = useState<string | null>(null);
  // The lock's end (ms since the epoch) after a 429, and the clock that counts down to it.
  const [lockedUntil, setLockedUntil] = useState<number | null>(null);
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (lockedUntil === null) return undefined;
    const t = setInterval(() => {
      setNow(Date.now());
      if (Date.now() >= lockedUntil) {
        setLockedUntil(null);
        setError(null);
      }
    }, 1000);
    return () => clearInterval(t);
  }, [lockedUntil]);
  const locked = lockedUntil !== null && lockedUntil > now;

  const submit = async (e: Event) => {
    e.preventDefault();
    if (locked) return;
    setBusy(true);
    setError(null);
    setWarning(null);
    try {
      onSignedIn(await post<Me>('/login', { email, password }));
    } catch (err) {
      if (err instanceof ApiError && err.code === 'invalid_credentials') {
        setError('That e-mail address and password do not match an account.');
        const left = err.body.attempts_left;
        if (typeof left === 'number' && left <= 2) {
          setWarning(
            left === 0
              ? 'No attempts left: sign-in for this e-mail address is locked from here for up to 15 minutes.'
              : left === 1
                ? 'One more failed sign-in locks this e-mail address out from here for 15 minutes.'
                : `${left} more failed sign-ins lock this e-mail address out from here for 15 minutes.`,
          );
        }
      } else if (err instanceof ApiError && err.code === 'login_rate_limited') {
        setLockedUntil(Date.now() + (err.retryAfter ?? 900) * 1000);
        setNow(Date.now());
        setError('Too many failed sign-ins for this e-mail address from here.');
      } else {
        setError(describeError(err));
      }
    } finally {
      setBusy(false);
    }
  };
  const wait = locked ? Math.max(0, Math.ceil(((lockedUntil as number) - now) / 1000)) : 0;

  return (
    <AuthFrame title="Sign in to the console">
      <form onSubmit={submit} noValidate={false}>
        <div aria-live="polite">
          {error && (
            <Notice tone="error">
              {error}
              {locked && (
                <>
                  {' '}
                  Sign-in opens again in{' '}
                  <span role="timer" aria-live="off">
                    {countdown(wait)}
                  </span>
                  .
                </>
              )}
            </Notice>
          )}
          {warning && <Notice tone="warning">{warning}</Notice>}
        </div>
        <Field label="E-mail">
          {({ id }) => (
            <input
              id={id}
              type="email"
              autoComplete="username"
              required
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          )}
        </Field>
        <PasswordField label="Password" kind="current" value={password} onValue={setPassword} />
        <button type="submit" class="btn btn-primary btn-block" disabled={busy || locked}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      {config.signup === 'open' ? (
        <p class="auth-alt">
          No account yet? <Link href={`${BASE}/signup`}>Create an account</Link>
        </p>
      ) : (
        <p class="auth-alt muted">Accounts on this deployment are created by invitation.</p>
      )}
    </AuthFrame>
  );
}

export function SignupPage({ onSignedIn }: { onSignedIn: (me: Me) => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | string | null>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    if (password.length < 12) {
      setError('The password needs at least 12 characters.');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      onSignedIn(await post<Me>('/signup', { email, password }));
    } catch (err) {
      if (err instanceof ApiError && err.code === 'email_taken') {
        setError('An account with this e-mail address exists already. Sign in instead.');
      } else if (err instanceof ApiError && err.code === 'signup_closed') {
        setError('Sign-up is closed on this deployment: ask its operator for an invitation.');
      } else if (err instanceof ApiError) {
        setError(err);
      } else {
        setError(describeError(err));
      }
    } finally {
      setBusy(false);
    }
  };

  const apiErr = error instanceof ApiError ? error : null;
  return (
    <AuthFrame title="Create your account">
      <form onSubmit={submit}>
        <div aria-live="polite">
          {error && (
            <Notice tone="error">{typeof error === 'string' ? error : error.message}</Notice>
          )}
        </div>
        <Field label="E-mail" error={apiErr?.fieldError('email')}>
          {({ id, describedBy }) => (
            <input
              id={id}
              type="email"
              autoComplete="email"
              required
              aria-describedby={describedBy}
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          )}
        </Field>
        <PasswordField
          label="Password"
          kind="new"
          hint={NEW_PASSWORD_HINT}
          error={apiErr?.fieldError('password')}
          value={password}
          onValue={setPassword}
        />
        <button type="submit" class="btn btn-primary btn-block" disabled={busy}>
          {busy ? 'Creating…' : 'Create account'}
        </button>
      </form>
      <p class="auth-alt">
        Already have an account? <Link href={`${BASE}/login`}>Sign in</Link>
      </p>
    </AuthFrame>
  );
}

/** The token is in the URL fragment (#token=…): never sent to a server, never in a log. */
function inviteToken(): string {
  return new URLSearchParams(location.hash.slice(1)).get('token') ?? '';
}

export function InvitePage({ onSignedIn }: { onSignedIn: (me: Me) => void }) {
  const [token] = useState(inviteToken);
  const [password, setPassword] = useState('');
  const [confirm, setConfirm] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  if (token === '') {
    return (
      <AuthFrame title="Invitation link incomplete">
        <Notice tone="error">
          This link has no invitation token. Open the full link from your invitation e-mail, or ask
          whoever invited you for a new one.
        </Notice>
        <p class="auth-alt">
          <Link href={`${BASE}/login`}>Go to sign in</Link>
        </p>
      </AuthFrame>
    );
  }

  const submit = async (e: Event) => {
    e.preventDefault();
    if (password.length < 12) {
      setError('The password needs at least 12 characters.');
      return;
    }
    if (password !== confirm) {
      setError('The two passwords differ.');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const me = await post<Me>('/invite/accept', { token, password });
      history.replaceState(null, '', location.pathname); // drop the spent token from the URL
      onSignedIn(me);
    } catch (err) {
      setError(
        err instanceof ApiError && err.code === 'invalid_invite'
          ? 'This invitation is invalid, expired or already used. Ask for a new one.'
          : describeError(err),
      );
    } finally {
      setBusy(false);
    }
  };

  return (
    <AuthFrame title="Set your password">
      <p>You were invited to tronwatch. Choose a password to finish setting up your account.</p>
      <form onSubmit={submit}>
        <div aria-live="polite">{error && <Notice tone="error">{error}</Notice>}</div>
        <PasswordField
          label="New password"
          kind="new"
          hint={NEW_PASSWORD_HINT}
          value={password}
          onValue={setPassword}
        />
        <PasswordField
          label="Repeat the password"
          kind="repeat"
          value={confirm}
          onValue={setConfirm}
        />
        <button type="submit" class="btn btn-primary btn-block" disabled={busy}>
          {busy ? 'Saving…' : 'Set password and sign in'}
        </button>
      </form>
    </AuthFrame>
  );
}
