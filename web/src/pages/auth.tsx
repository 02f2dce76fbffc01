/**
 * Signed-out pages: log in, sign up (when open), accept an invite (set a password), and password
 * reset (issue 18 item 2): ask for a link by e-mail, then choose a new password from it. When the
 * user has a second factor (issue 18 item 4) a right password leads to the code step, which takes
 * the 6 digits of an authenticator app or a recovery code.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, describeError, formatWait, get, post } from '../api';
import { Field, NEW_PASSWORD_HINT, Notice, PasswordField } from '../components/ui';
import { BASE, Link, navigate } from '../router';
import type { Config, Me, SecondFactorChallenge } from '../types';

/** What a right password answers: a session (Me), or the code step (issue 18 item 4). */
type SignInAnswer = Me | SecondFactorChallenge;

function isChallenge(a: SignInAnswer): a is SecondFactorChallenge {
  return (a as SecondFactorChallenge).second_factor_required === true;
}

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
  notice,
}: {
  config: Config;
  onSignedIn: (me: Me) => void;
  /** Why the last session ended, when the server said so (the live stream's reason). */
  notice?: string | null;
}) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [warning, setWarning] = useState<string | null>(null);
  const [challenge, setChallenge] = useState<SecondFactorChallenge | null>(null);
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
      const answer = await post<SignInAnswer>('/login', { email, password });
      if (isChallenge(answer)) {
        setPassword('');
        setChallenge(answer);
      } else onSignedIn(answer);
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

  if (challenge) {
    return (
      <CodeStep
        challenge={challenge}
        email={email}
        onSignedIn={onSignedIn}
        onRestart={(why) => {
          setChallenge(null);
          setError(why);
        }}
      />
    );
  }

  return (
    <AuthFrame title="Sign in to the console">
      {notice && <Notice tone="info">{notice}</Notice>}
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
      <p class="auth-alt">
        <Link href={`${BASE}/forgot`}>Forgot your password?</Link>
      </p>
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
function linkToken(): string {
  return new URLSearchParams(location.hash.slice(1)).get('token') ?? '';
}

/**
 * Set a password from a one-time link (an invitation or a reset, `#token=…`): the token missing,
 * the form (12 characters, typed twice), the server's answer, and the code step when the user has
 * a second factor. `refusal` words the link's own refusals; anything else is describeError's.
 */
function PasswordFromLink({
  path,
  title,
  intro,
  missing,
  refusal,
  after,
  onSignedIn,
}: {
  path: '/invite/accept' | '/password-reset/confirm';
  title: string;
  intro: ComponentChildren;
  missing: { title: string; text: string; link: { href: string; label: string } };
  refusal: (err: ApiError) => string | undefined;
  after?: ComponentChildren;
  onSignedIn: (me: Me) => void;
}) {
  const [token] = useState(linkToken);
  const [password, setPassword] = useState('');
  const [confirm, setConfirm] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [challenge, setChallenge] = useState<SecondFactorChallenge | null>(null);

  if (challenge) {
    // The password is set; a user with a second factor still types a code.
    return (
      <CodeStep
        challenge={challenge}
        onSignedIn={onSignedIn}
        onRestart={() => navigate(`${BASE}/login`, true)}
      />
    );
  }

  if (token === '') {
    return (
      <AuthFrame title={missing.title}>
        <Notice tone="error">{missing.text}</Notice>
        <p class="auth-alt">
          <Link href={missing.link.href}>{missing.link.label}</Link>
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
      const answer = await post<SignInAnswer>(path, { token, password });
      history.replaceState(null, '', location.pathname); // drop the spent token from the URL
      if (isChallenge(answer)) setChallenge(answer);
      else onSignedIn(answer);
    } catch (err) {
      setError((err instanceof ApiError && refusal(err)) || describeError(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <AuthFrame title={title}>
      <p>{intro}</p>
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
      {after}
    </AuthFrame>
  );
}

/** What an invitation link says (GET /console/api/invite): who invited whom, where, as what. */
interface InviteInfo {
  email: string;
  role: string;
  account_email: string;
  invited_by: string | null;
  expires_at: string;
}

/**
 * Accept an invitation (`/console/invite#token=…`): who invited you, to which account and with
 * which role (issue 29), then choose the password, then signed in.
 */
export function InvitePage({ onSignedIn }: { onSignedIn: (me: Me) => void }) {
  const [info, setInfo] = useState<InviteInfo | null>(null);
  useEffect(() => {
    const token = linkToken();
    if (token === '') return;
    get<InviteInfo>(`/invite?token=${encodeURIComponent(token)}`).then(setInfo, () => undefined);
  }, []);
  return (
    <PasswordFromLink
      path="/invite/accept"
      title="Set your password"
      intro={
        info ? (
          <>
            {info.invited_by ? <strong>{info.invited_by}</strong> : 'The operator'} invited{' '}
            <strong>{info.email}</strong> to the tronwatch console of{' '}
            <strong>{info.account_email}</strong>, as <strong>{info.role}</strong>. Choose a
            password to finish joining.
          </>
        ) : (
          'You were invited to tronwatch. Choose a password to finish setting up your account.'
        )
      }
      missing={{
        title: 'Invitation link incomplete',
        text: 'This link has no invitation token. Open the full link from your invitation e-mail, or ask whoever invited you for a new one.',
        link: { href: `${BASE}/login`, label: 'Go to sign in' },
      }}
      refusal={(err) =>
        err.code === 'invalid_invite'
          ? 'This invitation is invalid, expired or already used. Ask for a new one.'
          : undefined
      }
      onSignedIn={onSignedIn}
    />
  );
}

/** Ask for a password reset link by e-mail (the same answer whether the address is known). */
export function ForgotPage({ config }: { config: Config }) {
  const [email, setEmail] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [sent, setSent] = useState<string | null>(null);

  if (!config.email) {
    return (
      <AuthFrame title="Reset your password">
        <Notice tone="info">
          E-mail is off on this deployment, so no reset link can be sent. Ask an owner or admin of
          your account to remove and invite you again, or the operator for a new link (
          <code>tronwatch accounts invite --email …</code>).
        </Notice>
        <p class="auth-alt">
          <Link href={`${BASE}/login`}>Back to sign in</Link>
        </p>
      </AuthFrame>
    );
  }

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const r = await post<{ message: string }>('/password-reset', { email: email.trim() });
      setSent(r.message);
    } catch (err) {
      setError(
        err instanceof ApiError && err.code === 'login_rate_limited'
          ? `Too many reset requests. Try again in ${formatWait(err.retryAfter ?? 900)}.`
          : describeError(err),
      );
    } finally {
      setBusy(false);
    }
  };

  return (
    <AuthFrame title="Reset your password">
      {sent ? (
        <Notice tone="success">{sent} Check your inbox (and the spam folder).</Notice>
      ) : (
        <form onSubmit={submit}>
          <p>
            Enter the e-mail address you sign in with: we send it a link to choose a new password.
          </p>
          <div aria-live="polite">{error && <Notice tone="error">{error}</Notice>}</div>
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
          <button type="submit" class="btn btn-primary btn-block" disabled={busy}>
            {busy ? 'Sending…' : 'Send me a link'}
          </button>
        </form>
      )}
      <p class="auth-alt">
        <Link href={`${BASE}/login`}>Back to sign in</Link>
      </p>
    </AuthFrame>
  );
}

/** Choose a new password from a reset link (`/console/reset#token=…`); every other session ends. */
export function ResetPage({ onSignedIn }: { onSignedIn: (me: Me) => void }) {
  return (
    <PasswordFromLink
      path="/password-reset/confirm"
      title="Choose a new password"
      intro="Every session of your user is signed out when the new password is set."
      missing={{
        title: 'Reset link incomplete',
        text: 'This link has no reset token. Open the full link from the e-mail, or ask for a new one.',
        link: { href: `${BASE}/forgot`, label: 'Ask for a new link' },
      }}
      refusal={(err) =>
        err.code === 'invalid_reset'
          ? 'This reset link is invalid, expired (links work for 30 minutes) or already used. Ask for a new one.'
          : err.code === 'login_rate_limited'
            ? `Too many wrong links. Try again in ${formatWait(err.retryAfter ?? 900)}.`
            : undefined
      }
      after={
        <p class="auth-alt">
          <Link href={`${BASE}/forgot`}>Ask for a new link</Link>
        </p>
      }
      onSignedIn={onSignedIn}
    />
  );
}

/**
 * The code step of a sign-in (issue 18 item 4): the 6 digits of the authenticator app, or a
 * recovery code. A wrong code says how many tries are left; when the step is void (5 wrong codes,
 * 5 minutes, or the login limit) the user starts again from the password.
 */
function CodeStep({
  challenge,
  email,
  onSignedIn,
  onRestart,
}: {
  challenge: SecondFactorChallenge;
  email?: string;
  onSignedIn: (me: Me) => void;
  onRestart: (why: string) => void;
}) {
  const [recovery, setRecovery] = useState(false);
  const [code, setCode] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    const typed = code.trim();
    if (!recovery && !/^\d{6}$/.test(typed.replace(/\s+/g, ''))) {
      setError('The code has 6 digits: type the one your authenticator app shows now.');
      return;
    }
    if (recovery && typed.replace(/[\s-]/g, '').length !== 10) {
      setError('A recovery code has 10 letters and digits, like abcde-23456.');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      onSignedIn(
        await post<Me>('/login/second-factor', { challenge: challenge.challenge, code: typed }),
      );
    } catch (err) {
      if (err instanceof ApiError && err.code === 'invalid_code') {
        const left = err.body.attempts_left;
        if (left === 0) {
          onRestart('Too many wrong codes. Sign in again with your password.');
          return;
        }
        setCode('');
        setError(
          `${recovery ? 'That recovery code is wrong or already used.' : 'That code is wrong.'}${
            typeof left === 'number'
              ? ` ${left} ${left === 1 ? 'try' : 'tries'} left before you must sign in again.`
              : ''
          }`,
        );
      } else if (err instanceof ApiError && err.code === 'invalid_challenge') {
        onRestart(
          'This sign-in took too long or too many tries. Sign in again with your password.',
        );
      } else if (err instanceof ApiError && err.code === 'login_rate_limited') {
        onRestart(
          `Too many failed sign-ins for this e-mail address from here. Try again in ${formatWait(err.retryAfter ?? 900)}.`,
        );
      } else {
        setError(describeError(err));
      }
    } finally {
      setBusy(false);
    }
  };

  return (
    <AuthFrame title="Two-factor authentication">
      <p>
        {recovery
          ? 'Type one of the recovery codes you saved when you set up two-factor sign-in. Each works once.'
          : `Open your authenticator app and type the 6-digit code it shows for tronwatch${
              email ? ` (${email})` : ''
            }.`}
      </p>
      <form onSubmit={submit} noValidate>
        <div aria-live="polite">{error && <Notice tone="error">{error}</Notice>}</div>
        <Field label={recovery ? 'Recovery code' : 'Authentication code'}>
          {({ id }) => (
            <input
              id={id}
              key={recovery ? 'recovery' : 'totp'}
              type="text"
              inputMode={recovery ? 'text' : 'numeric'}
              autoComplete="one-time-code"
              autoCapitalize="off"
              spellcheck={false}
              maxLength={recovery ? 32 : 7}
              pattern={recovery ? undefined : '[0-9 ]*'}
              class="code-input"
              // biome-ignore lint/a11y/noAutofocus: the only field of this step, reached by a submit
              autoFocus
              value={code}
              onInput={(e) => setCode(e.currentTarget.value)}
            />
          )}
        </Field>
        <button type="submit" class="btn btn-primary btn-block" disabled={busy}>
          {busy ? 'Checking…' : 'Verify and sign in'}
        </button>
      </form>
      <p class="auth-alt">
        <button
          type="button"
          class="btn btn-link"
          onClick={() => {
            setRecovery(!recovery);
            setCode('');
            setError(null);
          }}
        >
          {recovery ? 'Use the authenticator app instead' : 'Use a recovery code instead'}
        </button>
      </p>
      <p class="auth-alt">
        <button type="button" class="btn btn-link" onClick={() => onRestart('')}>
          Start again
        </button>
      </p>
    </AuthFrame>
  );
}
