/** Account: plan and limits, Telegram, sign out (password and sessions: the Security page). */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, del, describeError, get, post } from '../api';
import { ConfirmDialog, CopyButton, Loading, Notice, PageHeader, Time } from '../components/ui';
import { useLoad } from '../hooks';
import { RoleNote, useRole } from '../roles';
import { BASE, Link } from '../router';
import { useApp } from '../state';

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
        <article class="card">
          <h2 class="card-title">Security</h2>
          <p>
            Your password, two-factor sign-in, recovery codes and the browsers signed in as you are
            on the <Link href={`${BASE}/security`}>Security</Link> page.
          </p>
        </article>
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
  const { role, can, explain } = useRole();
  // Connecting and disconnecting are an admin's (src/console/routes/telegram.ts).
  const admin = can('admin');
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
      setMessage({ tone: 'error', text: `Could not make a link: ${explain(e)}` });
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
          : `Could not disconnect: ${explain(e)}`;
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
          {admin ? (
            <button
              type="button"
              class="btn btn-secondary"
              disabled={busy}
              onClick={() => setConfirming(true)}
            >
              Disconnect
            </button>
          ) : (
            <RoleNote role={role} needed="admin" what="to connect or disconnect a chat" />
          )}
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
          {admin ? (
            <button type="button" class="btn btn-primary" disabled={busy} onClick={connect}>
              Connect Telegram
            </button>
          ) : (
            <RoleNote role={role} needed="admin" what="to connect or disconnect a chat" />
          )}
        </>
      )}
    </div>
  );
}
