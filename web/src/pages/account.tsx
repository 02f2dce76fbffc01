/** Account: profile and limits, change password, sessions, Telegram, sign out. */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, del, describeError, formatWait, get, post } from '../api';
import {
  ConfirmDialog,
  CopyButton,
  Loading,
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
import type { Session } from '../types';

type Msg = { tone: 'success' | 'error'; text: string } | null;

export function AccountPage() {
  const { me, config } = useApp();
  return (
    <section>
      <PageHeader title="Account" description={me.account.email} />
      <div class="stack">
        <article class="card">
          <h2 class="card-title">Plan and limits</h2>
          <dl class="facts facts-grid">
            <div>
              <dt>Plan</dt>
              <dd>{me.account.plan_name}</dd>
            </div>
            <div>
              <dt>Active watches</dt>
              <dd>up to {me.limits.active_watches}</dd>
            </div>
            <div>
              <dt>API requests</dt>
              <dd>{me.limits.requests_per_minute} per minute per key</dd>
            </div>
            <div>
              <dt>Member since</dt>
              <dd>
                <Time iso={me.account.created_at} />
              </dd>
            </div>
          </dl>
        </article>
        <Sessions />
        <ChangePassword />
        <article class="card" aria-labelledby="telegram-title">
          <h2 class="card-title" id="telegram-title">
            Telegram
          </h2>
          {config.telegram ? (
            <TelegramCard />
          ) : (
            <p class="muted">
              Telegram delivery is not configured on this deployment: its operator has not set up a
              bot.
            </p>
          )}
        </article>
        <article class="card">
          <h2 class="card-title">Sign out</h2>
          <p>Sign out of this browser. Your watches keep running.</p>
          <button
            type="button"
            class="btn btn-secondary"
            onClick={async () => {
              try {
                await post('/logout');
              } finally {
                location.assign(`${BASE}/login`);
              }
            }}
          >
            Sign out
          </button>
        </article>
      </div>
    </section>
  );
}

function Sessions() {
  const sessions = useLoad(() => get<{ data: Session[] }>('/sessions').then((r) => r.data), []);
  const [message, setMessage] = useState<Msg>(null);
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
      <div aria-live="polite">
        {message && (
          <Notice tone={message.tone} onDismiss={() => setMessage(null)}>
            {message.text}
          </Notice>
        )}
      </div>
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
  const [message, setMessage] = useState<Msg>(null);
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
      <div aria-live="polite">
        {message && (
          <Notice tone={message.tone} onDismiss={() => setMessage(null)}>
            {message.text}
          </Notice>
        )}
      </div>
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

/** GET /console/api/telegram (src/console/routes/telegram.ts). */
interface TelegramStatus {
  configured: boolean;
  bot_username: string | null;
  chat: { id: string; title: string | null; type: string | null; bound_at: string | null } | null;
}

/** How often the page asks whether the chat was connected while a link is shown, ms. */
const BIND_POLL_MS = 2_000;

/**
 * The Telegram chat of the account: Connect Telegram (a one-time deep link, copyable, with its
 * countdown; the page polls until the user pressed Start in Telegram), or the connected chat with
 * Disconnect (refused with 409 telegram_watches_active while chat watches exist).
 */
function TelegramCard() {
  const status = useLoad(() => get<TelegramStatus>('/telegram'), []);
  const [link, setLink] = useState<{ link: string; expires_at: string } | null>(null);
  const [message, setMessage] = useState<Msg>(null);
  const [busy, setBusy] = useState(false);
  const [now, setNow] = useState(Date.now());

  // While a link is shown: tick the countdown, and poll until the chat is connected.
  useEffect(() => {
    if (!link) return undefined;
    const tick = setInterval(() => setNow(Date.now()), 1_000);
    const poll = setInterval(async () => {
      try {
        const s = await get<TelegramStatus>('/telegram');
        if (s.chat) {
          status.setData(s);
          setLink(null);
          setMessage({ tone: 'success', text: 'Telegram chat connected.' });
        }
      } catch {
        // Polling again at the next tick.
      }
    }, BIND_POLL_MS);
    return () => {
      clearInterval(tick);
      clearInterval(poll);
    };
  }, [link]);

  const connect = async () => {
    setBusy(true);
    setMessage(null);
    try {
      setLink(await post<{ link: string; expires_at: string }>('/telegram/connect'));
      setNow(Date.now());
    } catch (e) {
      setMessage({ tone: 'error', text: `Could not make a link: ${describeError(e)}` });
    } finally {
      setBusy(false);
    }
  };

  const [confirming, setConfirming] = useState(false);
  const disconnect = async () => {
    setConfirming(false);
    setBusy(true);
    setMessage(null);
    try {
      await del('/telegram');
      await status.reload();
      setMessage({ tone: 'success', text: 'Telegram chat disconnected.' });
    } catch (e) {
      const text =
        e instanceof ApiError && e.code === 'telegram_watches_active'
          ? 'This chat still has chat watches: delete them on the Watches page first, then disconnect.'
          : `Could not disconnect: ${describeError(e)}`;
      setMessage({ tone: 'error', text });
    } finally {
      setBusy(false);
    }
  };

  if (status.loading && !status.data) return <Loading label="Loading Telegram…" />;
  if (status.error) {
    const down = status.error instanceof ApiError && status.error.code === 'telegram_unavailable';
    return (
      <Notice tone={down ? 'warning' : 'error'}>
        {down
          ? 'Telegram is temporarily unavailable: the bot has not reached Telegram yet. Try again in a minute.'
          : `Could not load Telegram: ${describeError(status.error)}`}
      </Notice>
    );
  }
  const chat = status.data?.chat;
  const left = link ? Math.max(0, Math.floor((Date.parse(link.expires_at) - now) / 1000)) : 0;
  return (
    <div class="stack">
      <div aria-live="polite">
        {message && (
          <Notice tone={message.tone} onDismiss={() => setMessage(null)}>
            {message.text}
          </Notice>
        )}
      </div>
      {chat ? (
        <>
          <p>Events of your chat watches are sent as messages to this chat.</p>
          <dl class="facts facts-grid">
            <div>
              <dt>Chat</dt>
              <dd>{chat.title ?? chat.id}</dd>
            </div>
            <div>
              <dt>Type</dt>
              <dd>{chat.type ?? 'unknown'}</dd>
            </div>
            <div>
              <dt>Connected</dt>
              <dd>{chat.bound_at ? <Time iso={chat.bound_at} /> : 'unknown'}</dd>
            </div>
          </dl>
          <button
            type="button"
            class="btn btn-secondary"
            disabled={busy}
            onClick={() => setConfirming(true)}
          >
            Disconnect
          </button>
          {confirming && (
            <ConfirmDialog
              title="Disconnect this Telegram chat?"
              confirmLabel="Disconnect"
              onConfirm={disconnect}
              onCancel={() => setConfirming(false)}
            >
              <p>
                <strong>{chat.title ?? chat.id}</strong> stops receiving messages from tronwatch.
                You can connect a chat again at any time with a new link.
              </p>
            </ConfirmDialog>
          )}
        </>
      ) : link ? (
        <>
          <p>
            Open this link in Telegram and press <strong>Start</strong> (to use a group, choose the
            group). This page updates once the chat is connected.
          </p>
          <p>
            <a
              href={link.link}
              target="_blank"
              rel="noreferrer"
              aria-label="Telegram connection link"
            >
              {link.link}
            </a>{' '}
            <CopyButton text={link.link} label="Copy link" />
          </p>
          <p class="muted" aria-live="off">
            {left > 0
              ? `Valid for ${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')} more, once.`
              : 'This link has expired.'}
          </p>
          {left === 0 && (
            <button type="button" class="btn btn-primary" disabled={busy} onClick={connect}>
              Make a new link
            </button>
          )}
        </>
      ) : (
        <>
          <p>
            Deliver events to a Telegram chat (a private chat with{' '}
            {status.data?.bot_username ? `@${status.data.bot_username}` : 'the bot'}, or a group)
            instead of a webhook.
          </p>
          <button type="button" class="btn btn-primary" disabled={busy} onClick={connect}>
            Connect Telegram
          </button>
        </>
      )}
    </div>
  );
}
