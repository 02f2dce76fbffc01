/**
 * Security (issue 18 items 4 and 6): the signed-in user's second factor (set up with a QR code and
 * a typed code, ten recovery codes shown once, new codes, turning it off with the password and a
 * code), the owner's rule that every member must have one, the password, and the browsers signed
 * in as the user. The server decides (src/console/routes/security.ts, account.ts); the page only
 * hides what the user's role cannot do.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, del, describeError, formatWait, get, post, put } from '../api';
import {
  ConfirmDialog,
  CopyButton,
  Field,
  Loading,
  type Message,
  MessageArea,
  NEW_PASSWORD_HINT,
  Notice,
  PageHeader,
  PasswordField,
  Pill,
  Time,
} from '../components/ui';
import { describeAgent } from '../format';
import { useLoad } from '../hooks';
import { BASE } from '../router';
import { useApp } from '../state';
import type { Me, Session, TwoFactorSetup, TwoFactorState } from '../types';

export function SecurityPage() {
  const { me, setMe } = useApp();
  const state = useLoad(() => get<TwoFactorState>('/two-factor'), []);
  // Recovery codes just made, shown once until the user says they are saved.
  const [codes, setCodes] = useState<string[] | null>(null);
  // After a change, the session's Me (two_factor, the requirement) is read again, so the
  // navigation and the other pages follow. Not while new codes are shown: a member whose set-up
  // was required would be sent on to the page they asked for before saving them.
  const refresh = async () => {
    await state.reload();
    setMe(await get<Me>('/session'));
  };
  const showCodes = (c: string[]) => {
    setCodes(c);
    void state.reload();
  };
  return (
    <section>
      <PageHeader title="Security" description={me.user.email} />
      <div class="stack">
        {me.user.two_factor_setup_required && (
          <Notice tone="warning">
            An owner of this account requires two-factor sign-in of every member. Set it up below to
            use the console.
          </Notice>
        )}
        <article class="card" aria-labelledby="tf-title">
          <header class="notification-head">
            <h2 class="card-title" id="tf-title">
              Two-factor sign-in
            </h2>
            {state.data &&
              (state.data.enabled ? <Pill tone="green">ON</Pill> : <Pill tone="gray">OFF</Pill>)}
          </header>
          {state.error !== undefined && (
            <Notice tone="error">Could not load it: {describeError(state.error)}</Notice>
          )}
          {codes && (
            <RecoveryCodes
              codes={codes}
              onDone={() => {
                setCodes(null);
                void refresh();
              }}
            />
          )}
          {state.data === undefined ? (
            state.error === undefined && <Loading label="Loading…" />
          ) : state.data.enabled ? (
            !codes && <TwoFactorOn state={state.data} onChange={refresh} onCodes={showCodes} />
          ) : (
            <TwoFactorOff onCodes={showCodes} />
          )}
        </article>
        {me.user.role === 'owner' && state.data && (
          <RequireCard state={state.data} onChange={refresh} />
        )}
        {!me.user.two_factor_setup_required && (
          <>
            <ChangePassword />
            <Sessions />
          </>
        )}
      </div>
    </section>
  );
}

/** Ten recovery codes, shown once: copy, download, confirm. */
function RecoveryCodes({ codes, onDone }: { codes: string[]; onDone: () => void }) {
  const ref = useRef<HTMLElement>(null);
  useEffect(() => {
    ref.current?.focus();
  }, []);
  const text = `${codes.join('\n')}\n`;
  const href = `data:text/plain;charset=utf-8,${encodeURIComponent(
    `tronwatch recovery codes\nEach code works once, instead of a code from your authenticator app.\n\n${text}`,
  )}`;
  return (
    <section class="secret-once" aria-label="Recovery codes" tabIndex={-1} ref={ref}>
      <h3>Two-factor sign-in is on: your recovery codes</h3>
      <p>
        <strong>Save them now: they are shown only this once.</strong> Each signs you in once if
        your phone is lost. Keep them somewhere other than the phone (a password manager).
      </p>
      <ol class="recovery-codes" data-testid="recovery-codes">
        {codes.map((c) => (
          <li key={c}>
            <code class="mono">{c}</code>
          </li>
        ))}
      </ol>
      <div class="form-actions">
        <CopyButton text={text} label="Copy codes" />
        <a class="btn btn-secondary" href={href} download="tronwatch-recovery-codes.txt">
          Download
        </a>
        <button type="button" class="btn btn-primary" onClick={onDone}>
          I have saved them
        </button>
      </div>
    </section>
  );
}

/** Not on: password → QR code and key → typed code → recovery codes. */
function TwoFactorOff({ onCodes }: { onCodes: (codes: string[]) => void }) {
  const [password, setPassword] = useState('');
  const [setup, setSetup] = useState<TwoFactorSetup | null>(null);
  const [code, setCode] = useState('');
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<Message>(null);

  const start = async (e: Event) => {
    e.preventDefault();
    if (password === '') {
      setMessage({ tone: 'error', text: 'Type your password first.' });
      return;
    }
    setBusy(true);
    setMessage(null);
    try {
      setSetup(await post<TwoFactorSetup>('/two-factor/setup', { password }));
      setPassword('');
    } catch (err) {
      setMessage({ tone: 'error', text: passwordError(err) });
    } finally {
      setBusy(false);
    }
  };

  const confirm = async (e: Event) => {
    e.preventDefault();
    if (!/^\d{6}$/.test(code.replace(/\s+/g, ''))) {
      setMessage({ tone: 'error', text: 'The code has 6 digits: type the one the app shows now.' });
      return;
    }
    setBusy(true);
    setMessage(null);
    try {
      const r = await post<{ recovery_codes: string[] }>('/two-factor/enable', { code });
      onCodes(r.recovery_codes);
    } catch (err) {
      setCode('');
      setMessage({
        tone: 'error',
        text:
          err instanceof ApiError && err.code === 'invalid_code'
            ? 'That code is wrong. Check that the phone’s clock is right, and type the code the app shows now.'
            : describeError(err),
      });
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <p>
        Signing in then asks for your password and a 6-digit code from an authenticator app on your
        phone (Google Authenticator, 1Password, Authy, Microsoft Authenticator…), so a stolen
        password alone opens nothing.
      </p>
      <MessageArea message={message} onDismiss={() => setMessage(null)} />
      {setup === null ? (
        <form onSubmit={start} class="form-narrow" noValidate>
          <PasswordField
            label="Your password"
            kind="current"
            value={password}
            onValue={setPassword}
          />
          <div class="form-actions">
            <button type="submit" class="btn btn-primary" disabled={busy}>
              {busy ? 'Checking…' : 'Set up two-factor sign-in'}
            </button>
          </div>
        </form>
      ) : (
        <form onSubmit={confirm} class="enrol" noValidate>
          <ol class="enrol-steps">
            <li>
              <p>Scan this QR code with your authenticator app:</p>
              <img
                class="qr"
                width={200}
                height={200}
                src={`data:image/svg+xml;charset=utf-8,${encodeURIComponent(setup.qr_svg)}`}
                alt="QR code of the two-factor secret (the key below, as text)"
              />
              <p class="muted">Or type this key into the app (time-based):</p>
              <div class="secret-value">
                <code class="mono" data-testid="totp-secret">
                  {setup.secret.replace(/(.{4})/g, '$1 ').trim()}
                </code>
                <CopyButton text={setup.secret} label="Copy key" />
              </div>
            </li>
            <li>
              <Field label="The 6-digit code the app shows" hint="It changes every 30 seconds.">
                {({ id, describedBy }) => (
                  <input
                    id={id}
                    type="text"
                    inputMode="numeric"
                    autoComplete="one-time-code"
                    maxLength={7}
                    class="code-input"
                    aria-describedby={describedBy}
                    value={code}
                    onInput={(e) => setCode(e.currentTarget.value)}
                  />
                )}
              </Field>
            </li>
          </ol>
          <div class="form-actions">
            <button type="submit" class="btn btn-primary" disabled={busy}>
              {busy ? 'Checking…' : 'Turn on'}
            </button>
            <button
              type="button"
              class="btn btn-secondary"
              onClick={() => {
                setSetup(null);
                setCode('');
                setMessage(null);
              }}
            >
              Cancel
            </button>
          </div>
        </form>
      )}
    </>
  );
}

function passwordError(err: unknown): string {
  if (err instanceof ApiError && err.code === 'invalid_credentials')
    return 'The password is wrong.';
  if (err instanceof ApiError && err.code === 'login_rate_limited') {
    return `Too many wrong passwords or codes. Try again in ${formatWait(err.retryAfter ?? 900)}.`;
  }
  return describeError(err);
}

/** On: recovery codes left, new codes, turn off. */
function TwoFactorOn({
  state,
  onChange,
  onCodes,
}: {
  state: TwoFactorState;
  onChange: () => Promise<void>;
  onCodes: (codes: string[]) => void;
}) {
  const [mode, setMode] = useState<'idle' | 'codes' | 'off'>('idle');
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<Message>(null);
  const reset = () => {
    setMode('idle');
    setPassword('');
    setCode('');
  };

  const newCodes = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setMessage(null);
    try {
      const r = await post<{ recovery_codes: string[] }>('/two-factor/recovery-codes', {
        password,
        code,
      });
      reset();
      onCodes(r.recovery_codes);
    } catch (err) {
      setMessage({
        tone: 'error',
        text:
          err instanceof ApiError && err.code === 'invalid_code'
            ? 'That code is wrong: type the code the app shows now, or an unused recovery code.'
            : passwordError(err),
      });
    } finally {
      setBusy(false);
    }
  };

  const turnOff = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setMessage(null);
    try {
      await post('/two-factor/disable', { password, code });
      reset();
      await onChange();
    } catch (err) {
      setMessage({
        tone: 'error',
        text:
          err instanceof ApiError && err.code === 'invalid_code'
            ? 'That code is wrong: type the code the app shows now, or an unused recovery code.'
            : passwordError(err),
      });
    } finally {
      setBusy(false);
    }
  };

  const low = state.recovery_codes_left <= 3;
  return (
    <>
      <dl class="facts facts-grid">
        <div>
          <dt>On since</dt>
          <dd>{state.enabled_at ? <Time iso={state.enabled_at} /> : 'on'}</dd>
        </div>
        <div>
          <dt>Recovery codes left</dt>
          <dd>
            {state.recovery_codes_left} of 10{' '}
            {low && <Pill tone="amber">{state.recovery_codes_left === 0 ? 'NONE' : 'LOW'}</Pill>}
          </dd>
        </div>
      </dl>
      <MessageArea message={message} onDismiss={() => setMessage(null)} />
      {mode === 'idle' && (
        <div class="form-actions">
          <button type="button" class="btn btn-secondary" onClick={() => setMode('codes')}>
            New recovery codes
          </button>
          <button type="button" class="btn btn-danger-outline" onClick={() => setMode('off')}>
            Turn off two-factor sign-in
          </button>
        </div>
      )}
      {mode === 'codes' && (
        <form onSubmit={newCodes} class="form-narrow" noValidate>
          <p>
            Ten new codes replace the ones you have: the old ones stop working. You are e-mailed
            when new codes are made.
          </p>
          <PasswordField
            label="Your password"
            kind="current"
            value={password}
            onValue={setPassword}
          />
          <Field label="A code from the app, or a recovery code">
            {({ id }) => (
              <input
                id={id}
                type="text"
                autoComplete="one-time-code"
                maxLength={32}
                class="code-input"
                value={code}
                onInput={(e) => setCode(e.currentTarget.value)}
              />
            )}
          </Field>
          <div class="form-actions">
            <button
              type="submit"
              class="btn btn-primary"
              disabled={busy || password === '' || code.trim() === ''}
            >
              {busy ? 'Making codes…' : 'Make new codes'}
            </button>
            <button type="button" class="btn btn-secondary" onClick={reset}>
              Cancel
            </button>
          </div>
        </form>
      )}
      {mode === 'off' && (
        <form onSubmit={turnOff} class="form-narrow" noValidate>
          <p>
            {state.required
              ? 'This account requires two-factor sign-in: after turning it off you must set it up again before using the console.'
              : 'Signing in will ask for your password only.'}
          </p>
          <PasswordField
            label="Your password"
            kind="current"
            value={password}
            onValue={setPassword}
          />
          <Field label="A code from the app, or a recovery code">
            {({ id }) => (
              <input
                id={id}
                type="text"
                autoComplete="one-time-code"
                maxLength={32}
                class="code-input"
                value={code}
                onInput={(e) => setCode(e.currentTarget.value)}
              />
            )}
          </Field>
          <div class="form-actions">
            <button
              type="submit"
              class="btn btn-danger"
              disabled={busy || password === '' || code.trim() === ''}
            >
              {busy ? 'Turning off…' : 'Turn off'}
            </button>
            <button type="button" class="btn btn-secondary" onClick={reset}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </>
  );
}

/** The owner's rule: every member must have a second factor. */
function RequireCard({
  state,
  onChange,
}: {
  state: TwoFactorState;
  onChange: () => Promise<void>;
}) {
  const [confirming, setConfirming] = useState(false);
  const [message, setMessage] = useState<Message>(null);
  const apply = async (required: boolean) => {
    setMessage(null);
    try {
      await put('/account/two-factor', { required });
      await onChange();
      setMessage({
        tone: 'success',
        text: required
          ? 'Every member now needs two-factor sign-in. Members without it can only set it up until they have.'
          : 'Two-factor sign-in is no longer required of every member.',
      });
    } catch (err) {
      setMessage({ tone: 'error', text: describeError(err) });
    } finally {
      setConfirming(false);
    }
  };
  return (
    <article class="card" aria-labelledby="req-title">
      <header class="notification-head">
        <h2 class="card-title" id="req-title">
          Require two-factor sign-in
        </h2>
        <Pill tone={state.required ? 'green' : 'gray'}>
          {state.required ? 'REQUIRED' : 'OPTIONAL'}
        </Pill>
      </header>
      <p class="muted">
        Owners only. When required, a member without a second factor can sign in but reaches nothing
        until they set one up. On the Members page an owner can turn off the second factor of a
        member who lost their phone and their recovery codes.
      </p>
      <MessageArea message={message} onDismiss={() => setMessage(null)} />
      {state.required ? (
        <button type="button" class="btn btn-secondary" onClick={() => void apply(false)}>
          Stop requiring it
        </button>
      ) : state.enabled ? (
        <button type="button" class="btn btn-primary" onClick={() => setConfirming(true)}>
          Require it of every member
        </button>
      ) : (
        <p>Turn on your own two-factor sign-in first.</p>
      )}
      {confirming && (
        <ConfirmDialog
          title="Require two-factor sign-in?"
          confirmLabel="Require it"
          onConfirm={() => apply(true)}
          onCancel={() => setConfirming(false)}
        >
          <p>
            Every member without a second factor will have to set one up before they can use the
            console again. API keys are not affected.
          </p>
        </ConfirmDialog>
      )}
    </article>
  );
}

function Sessions() {
  const sessions = useLoad(() => get<{ data: Session[] }>('/sessions').then((r) => r.data), []);
  const [message, setMessage] = useState<Message>(null);
  const [confirmOthers, setConfirmOthers] = useState(false);
  const [busy, setBusy] = useState<string | null>(null);

  const revoke = async (s: Session) => {
    if (s.current) {
      await post('/logout').catch(() => undefined);
      location.assign(`${BASE}/login`);
      return;
    }
    setBusy(s.id);
    setMessage(null);
    try {
      await del(`/sessions/${encodeURIComponent(s.id)}`);
      sessions.setData((sessions.data ?? []).filter((x) => x.id !== s.id));
      setMessage({ tone: 'success', text: `Session signed out (${describeAgent(s.user_agent)}).` });
    } catch (e) {
      setMessage({ tone: 'error', text: `Could not revoke the session: ${describeError(e)}` });
    } finally {
      setBusy(null);
    }
  };

  const revokeOthers = async () => {
    setMessage(null);
    try {
      const r = await post<{ revoked: number }>('/sessions/revoke-others');
      setMessage({
        tone: 'success',
        text: `${r.revoked} other ${r.revoked === 1 ? 'session' : 'sessions'} signed out.`,
      });
      await sessions.reload();
    } catch (e) {
      setMessage({ tone: 'error', text: `Could not sign out the others: ${describeError(e)}` });
    } finally {
      setConfirmOthers(false);
    }
  };

  const list = sessions.data;
  const others = list?.filter((s) => !s.current).length ?? 0;
  return (
    <article class="card">
      <header class="notification-head">
        <h2 class="card-title">Sessions</h2>
        <button
          type="button"
          class="btn btn-secondary btn-small"
          disabled={others === 0}
          onClick={() => setConfirmOthers(true)}
        >
          Sign out other sessions
        </button>
      </header>
      <p class="muted">
        Browsers signed in to this account. A session expires after 7 days unused.
      </p>
      <MessageArea message={message} onDismiss={() => setMessage(null)} />
      {sessions.error !== undefined && (
        <Notice tone="error">Could not load sessions: {describeError(sessions.error)}</Notice>
      )}
      {list === undefined ? (
        sessions.error === undefined && <Loading label="Loading sessions…" />
      ) : (
        <table class="table">
          <thead>
            <tr>
              <th scope="col">Device</th>
              <th scope="col">IP address</th>
              <th scope="col">Signed in</th>
              <th scope="col">Last active</th>
              <th scope="col">Expires</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.map((s) => (
              <tr key={s.id}>
                <td data-label="Device">
                  <span title={s.user_agent ?? ''}>{describeAgent(s.user_agent)}</span>{' '}
                  {s.current && <Pill tone="blue">This session</Pill>}
                </td>
                <td data-label="IP address">
                  <code class="mono">{s.ip ?? '—'}</code>
                </td>
                <td data-label="Signed in">
                  <Time iso={s.created_at} />
                </td>
                <td data-label="Last active">
                  <Time iso={s.last_used_at} rel />
                </td>
                <td data-label="Expires">
                  <Time iso={s.expires_at} />
                </td>
                <td data-label="Actions">
                  <button
                    type="button"
                    class="btn btn-secondary btn-small"
                    disabled={busy === s.id}
                    aria-label={
                      s.current
                        ? 'Sign out this session'
                        : `Revoke session ${describeAgent(s.user_agent)} ${s.ip ?? ''}`.trim()
                    }
                    onClick={() => void revoke(s)}
                  >
                    {s.current ? 'Sign out' : 'Revoke'}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {confirmOthers && (
        <ConfirmDialog
          title="Sign out the other sessions?"
          confirmLabel="Sign out others"
          onConfirm={revokeOthers}
          onCancel={() => setConfirmOthers(false)}
        >
          <p>
            Every browser signed in to this account except this one is signed out at once. API keys
            are not affected.
          </p>
        </ConfirmDialog>
      )}
    </article>
  );
}

function ChangePassword() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [repeat, setRepeat] = useState('');
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<Message>(null);
  const [fieldErr, setFieldErr] = useState<ApiError | null>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    setMessage(null);
    setFieldErr(null);
    if (next.length < 12) {
      setMessage({ tone: 'error', text: 'The new password needs at least 12 characters.' });
      return;
    }
    if (next !== repeat) {
      setMessage({ tone: 'error', text: 'The two new passwords differ.' });
      return;
    }
    setBusy(true);
    try {
      const r = await post<{ revoked_sessions: number }>('/password', {
        current_password: current,
        new_password: next,
      });
      setCurrent('');
      setNext('');
      setRepeat('');
      setMessage({
        tone: 'success',
        text:
          r.revoked_sessions > 0
            ? `Password changed. ${r.revoked_sessions} other ${r.revoked_sessions === 1 ? 'session was' : 'sessions were'} signed out.`
            : 'Password changed.',
      });
    } catch (err) {
      if (err instanceof ApiError && err.code === 'invalid_credentials') {
        setMessage({ tone: 'error', text: 'The current password is wrong.' });
      } else if (err instanceof ApiError && err.code === 'login_rate_limited') {
        // The sign-in's limit: five wrong passwords per 15 minutes from this address.
        setMessage({
          tone: 'error',
          text: `Too many wrong passwords. Try again in ${formatWait(err.retryAfter ?? 900)}.`,
        });
      } else {
        if (err instanceof ApiError) setFieldErr(err);
        setMessage({ tone: 'error', text: `Could not change the password: ${describeError(err)}` });
      }
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card form-card" onSubmit={submit} aria-labelledby="pw-title">
      <h2 id="pw-title" class="card-title">
        Change password
      </h2>
      <p class="muted">Your other sessions are signed out; this one stays signed in.</p>
      <MessageArea message={message} onDismiss={() => setMessage(null)} />
      <PasswordField label="Current password" kind="current" value={current} onValue={setCurrent} />
      <PasswordField
        label="New password"
        kind="new"
        hint={NEW_PASSWORD_HINT}
        error={fieldErr?.fieldError('new_password')}
        value={next}
        onValue={setNext}
      />
      <PasswordField
        label="Repeat the new password"
        kind="repeat"
        value={repeat}
        onValue={setRepeat}
      />
      <div class="form-actions">
        <button type="submit" class="btn btn-primary" disabled={busy}>
          {busy ? 'Saving…' : 'Change password'}
        </button>
      </div>
    </form>
  );
}
