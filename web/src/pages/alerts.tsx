/**
 * Alerts (issue 29 item 1): where the account's watch alerts go. E-mail (to the members who opted
 * in on the Members page), a Slack-compatible incoming webhook and a signed alert webhook for an
 * on-call tool, each with a test button. Admins and owners only (src/console/routes/alerts.ts):
 * below that the page says so and asks nothing. A channel's URL is shown by its host only; the
 * alert webhook's secret is shown once, when the channel is added.
 */
import { useState } from 'preact/hooks';
import { ApiError, del, describeError, get, post, put } from '../api';
import {
  ConfirmDialog,
  Field,
  Loading,
  Notice,
  PageHeader,
  Pill,
  SecretOnce,
  Time,
} from '../components/ui';
import { useLoad } from '../hooks';
import { RoleNote, useRole } from '../roles';
import { BASE, Link } from '../router';
import type { AlertChannel, AlertChannelKind, AlertSettings } from '../types';

type Message = { tone: 'success' | 'error'; text: string } | null;

const KINDS: Record<
  AlertChannelKind,
  { title: string; what: string; placeholder: string; hint: string }
> = {
  slack: {
    title: 'Slack-compatible webhook',
    what: 'Slack-compatible webhook',
    placeholder: 'https://hooks.slack.com/services/…',
    hint: 'An incoming webhook URL of Slack, Mattermost, Rocket.Chat or Discord (its /slack URL). Only its host is shown after saving.',
  },
  webhook: {
    title: 'Signed alert webhook',
    what: 'alert webhook',
    placeholder: 'https://oncall.example.com/tronwatch',
    hint: 'Your on-call tool or bridge receives a JSON POST signed with Standard Webhooks headers. Only its host is shown after saving.',
  },
};

export function AlertsPage() {
  const { role, can, explain } = useRole();
  const admin = can('admin');
  const settings = useLoad(
    () => (admin ? get<AlertSettings>('/alert-settings') : Promise.resolve(undefined)),
    [admin],
  );
  const [message, setMessage] = useState<Message>(null);
  const [secret, setSecret] = useState<string | null>(null);
  const [testing, setTesting] = useState<string | null>(null);

  /** `how`: "by e-mail", "on the Slack-compatible webhook"… */
  const test = async (target: 'email' | AlertChannelKind, how: string) => {
    setTesting(target);
    setMessage(null);
    try {
      const r = await post<{ ok: boolean; error: string | null }>('/alert-settings/test', {
        target,
      });
      setMessage(
        r.ok
          ? { tone: 'success', text: `Test alert sent ${how}.` }
          : { tone: 'error', text: `The test alert ${how} failed: ${r.error ?? ''}` },
      );
    } catch (err) {
      setMessage({ tone: 'error', text: `Could not send a test alert: ${explain(err)}` });
    } finally {
      setTesting(null);
    }
  };

  const s = settings.data;
  return (
    <section>
      <PageHeader
        title="Alerts"
        description={
          <>
            Your team hears when a watch's deliveries start failing and when they recover: one alert
            when an outage starts, one when it ends, every time. Alerts name the receiver by its
            host only.
          </>
        }
      />
      {!admin ? (
        <RoleNote role={role} needed="admin" what="to see and change where alerts go" />
      ) : (
        <>
          <div aria-live="polite">
            {message && (
              <Notice tone={message.tone} onDismiss={() => setMessage(null)}>
                {message.text}
              </Notice>
            )}
          </div>
          {secret && (
            <SecretOnce
              title="The alert webhook's signing secret"
              secret={secret}
              onDone={() => setSecret(null)}
            >
              <p>
                Verify each alert with any Standard Webhooks library: the <code>webhook-id</code>,{' '}
                <code>webhook-timestamp</code> and <code>webhook-signature</code> headers, over the
                exact body.
              </p>
            </SecretOnce>
          )}
          {settings.error !== undefined && (
            <Notice tone="error">
              Could not load the alert settings: {describeError(settings.error)}
            </Notice>
          )}
          {s === undefined ? (
            settings.error === undefined && <Loading label="Loading alert settings…" />
          ) : (
            <div class="alert-settings">
              <p class="muted">
                {s.pace_minutes > 0
                  ? `A flapping endpoint is summed up, never silent: at most one alert per watch and channel every ${s.pace_minutes} ${s.pace_minutes === 1 ? 'minute' : 'minutes'}, listing the changes in between.`
                  : 'Every change is sent as it happens (WATCH_ALERT_PACE_MINUTES is 0 on this server); changes that wait together, after a failed send, are listed in one alert.'}
              </p>
              <section class="card form-card" aria-labelledby="alerts-email">
                <h2 id="alerts-email" class="card-title">
                  E-mail{' '}
                  {s.email.available ? <Pill tone="green">ON</Pill> : <Pill tone="gray">OFF</Pill>}
                </h2>
                {s.email.available ? (
                  <p>
                    {s.email.recipients.length > 0 ? (
                      <>
                        Alerts are e-mailed to{' '}
                        <span class="wrap-anywhere">{s.email.recipients.join(', ')}</span>.
                      </>
                    ) : (
                      'No member gets alert e-mails.'
                    )}{' '}
                    Each member chooses on the <Link href={`${BASE}/members`}>Members page</Link>.
                  </p>
                ) : (
                  <p>E-mail is off on this server (its operator sets SMTP_URL).</p>
                )}
                {s.email.available && (
                  <div class="form-actions">
                    <button
                      type="button"
                      class="btn btn-secondary"
                      disabled={testing !== null}
                      onClick={() => void test('email', 'by e-mail')}
                    >
                      {testing === 'email' ? 'Sending…' : 'Send a test e-mail'}
                    </button>
                  </div>
                )}
              </section>
              {(['slack', 'webhook'] as const).map((kind) => (
                <ChannelCard
                  key={kind}
                  kind={kind}
                  channel={s.channels.find((c) => c.kind === kind)}
                  testing={testing}
                  onTest={() => void test(kind, `on the ${KINDS[kind].what}`)}
                  onSaved={(text, newSecret) => {
                    setMessage({ tone: 'success', text });
                    if (newSecret) setSecret(newSecret);
                    void settings.reload();
                  }}
                  onError={(text) => setMessage({ tone: 'error', text })}
                  explain={explain}
                />
              ))}
            </div>
          )}
        </>
      )}
    </section>
  );
}

function ChannelCard({
  kind,
  channel,
  testing,
  onTest,
  onSaved,
  onError,
  explain,
}: {
  kind: AlertChannelKind;
  channel: AlertChannel | undefined;
  testing: string | null;
  onTest: () => void;
  onSaved: (text: string, secret?: string | null) => void;
  onError: (text: string) => void;
  explain: (e: unknown) => string;
}) {
  const k = KINDS[kind];
  const [url, setUrl] = useState('');
  const [urlError, setUrlError] = useState<string | undefined>(undefined);
  const [editing, setEditing] = useState(false);
  const [busy, setBusy] = useState(false);
  const [removing, setRemoving] = useState(false);
  const titleId = `alerts-${kind}`;

  const save = async (body: { url?: string; enabled?: boolean }, done: string) => {
    setBusy(true);
    setUrlError(undefined);
    try {
      const r = await put<{ channel: AlertChannel; secret: string | null }>(
        `/alert-settings/channels/${kind}`,
        body,
      );
      setUrl('');
      setEditing(false);
      onSaved(done, r.secret);
    } catch (err) {
      const refused = err instanceof ApiError ? err.fieldError('url') : undefined;
      if (body.url !== undefined && refused) setUrlError(`This URL is refused: ${refused}.`);
      else onError(`Could not save the ${k.what}: ${explain(err)}`);
    } finally {
      setBusy(false);
    }
  };

  const urlForm = (label: string) => (
    <form
      class="inline-fields"
      onSubmit={(e) => {
        e.preventDefault();
        void save(
          { url: url.trim() },
          channel ? `The ${k.what} now posts to its new URL.` : `The ${k.what} is added.`,
        );
      }}
    >
      <Field label={`${k.title} URL`} hint={k.hint} error={urlError}>
        {({ id, describedBy }) => (
          <input
            id={id}
            type="url"
            required
            maxLength={2048}
            placeholder={k.placeholder}
            aria-describedby={describedBy}
            value={url}
            onInput={(e) => setUrl(e.currentTarget.value)}
          />
        )}
      </Field>
      <button type="submit" class="btn btn-primary" disabled={busy}>
        {busy ? 'Saving…' : label}
      </button>
    </form>
  );

  return (
    <section class="card form-card" aria-labelledby={titleId}>
      <h2 id={titleId} class="card-title">
        {k.title}{' '}
        {channel && (channel.enabled ? <Pill tone="green">ON</Pill> : <Pill tone="gray">OFF</Pill>)}
      </h2>
      {!channel ? (
        urlForm(`Add ${kind === 'slack' ? 'webhook' : 'alert webhook'}`)
      ) : (
        <>
          <dl class="facts facts-grid">
            <dt>Host</dt>
            <dd>
              <code class="mono wrap-anywhere">{channel.host}</code>
            </dd>
            <dt>Last alert sent</dt>
            <dd>{channel.last_sent_at ? <Time iso={channel.last_sent_at} rel /> : 'never'}</dd>
            <dt>Waiting</dt>
            <dd>{channel.pending}</dd>
            {channel.last_error && (
              <>
                <dt>Last failure</dt>
                <dd class="wrap-anywhere">{channel.last_error}</dd>
              </>
            )}
          </dl>
          {editing && urlForm('Save URL')}
          <div class="form-actions">
            <button
              type="button"
              class="btn btn-secondary"
              disabled={testing !== null || !channel.enabled}
              onClick={onTest}
            >
              {testing === kind ? 'Sending…' : 'Send a test alert'}
            </button>
            <button
              type="button"
              class="btn btn-secondary"
              disabled={busy}
              onClick={() =>
                void save(
                  { enabled: !channel.enabled },
                  channel.enabled
                    ? `The ${k.what} is off: no alert goes to it.`
                    : `The ${k.what} is on again.`,
                )
              }
            >
              {channel.enabled ? 'Turn off' : 'Turn on'}
            </button>
            {!editing && (
              <button type="button" class="btn btn-secondary" onClick={() => setEditing(true)}>
                Change URL
              </button>
            )}
            <button type="button" class="btn btn-danger-outline" onClick={() => setRemoving(true)}>
              Remove
            </button>
          </div>
        </>
      )}
      {removing && (
        <ConfirmDialog
          title={`Remove the ${k.what}?`}
          confirmLabel="Remove"
          danger
          onConfirm={async () => {
            try {
              await del(`/alert-settings/channels/${kind}`);
              onSaved(`The ${k.what} is removed.`);
            } catch (err) {
              onError(`Could not remove the ${k.what}: ${explain(err)}`);
            } finally {
              setRemoving(false);
            }
          }}
          onCancel={() => setRemoving(false)}
        >
          <p>
            Alerts stop going to <code class="mono">{channel?.host}</code>, and the ones waiting for
            it are dropped.
            {kind === 'webhook' && ' Adding it again makes a new signing secret.'}
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}
