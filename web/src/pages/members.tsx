/**
 * Members (issue 18 item 3): who can use this account's console and with which role. An owner or
 * admin invites by e-mail (the link goes by e-mail, or is shown to copy when e-mail is off),
 * changes roles and removes members; everyone sees the list and may leave. Each member turns
 * watch alert e-mails on or off for themselves (issue 19 item 2: the "Alert e-mails" column; a
 * checkbox on the signed-in user's row, the others' choice shown). The server decides
 * (src/console/routes/members.ts): the page only hides what the user's role cannot do.
 */
import { useState } from 'preact/hooks';
import { ApiError, del, describeError, get, post, put } from '../api';
import {
  ConfirmDialog,
  CopyButton,
  Field,
  Loading,
  Notice,
  PageHeader,
  Pill,
  Time,
  type Tone,
} from '../components/ui';
import { useLoad } from '../hooks';
import { BASE } from '../router';
import { useApp } from '../state';
import type { InviteResult, Member, Role } from '../types';

const ROLES: Role[] = ['owner', 'admin', 'developer', 'viewer'];
const RANK: Record<Role, number> = { owner: 3, admin: 2, developer: 1, viewer: 0 };

const ROLE_TEXT: Record<Role, string> = {
  owner: 'everything, owners included',
  admin: 'everything but owners: members, Telegram, keys, watches',
  developer: 'API keys, watches, test sends, redelivery',
  viewer: 'read-only',
};

const ROLE_TONE: Record<Role, Tone> = {
  owner: 'blue',
  admin: 'blue',
  developer: 'green',
  viewer: 'gray',
};

function explain(err: unknown): string {
  if (err instanceof ApiError && err.code === 'last_owner') {
    return 'The account needs at least one owner: make another member owner first.';
  }
  if (err instanceof ApiError && err.code === 'insufficient_role') {
    return `Your role does not allow this. ${err.message}.`;
  }
  if (err instanceof ApiError && err.code === 'email_taken') {
    return 'This e-mail address already signs in to tronwatch (this account or another).';
  }
  return describeError(err);
}

/** A key narrowed or revoked with its maker (src/accounts/membership.ts). */
interface KeyChange {
  id: string;
  name: string | null;
  prefix: string;
  role: string;
}

/** "The API key ci (tw_live_Ab12…)" / "3 API keys (…, …)". */
function keysSentence(keys: KeyChange[]): string {
  const names = keys.map((k) => `${k.name ?? 'unnamed'} (${k.prefix}…)`).join(', ');
  return keys.length === 1 ? `The API key ${names}` : `${keys.length} API keys: ${names},`;
}

export function MembersPage() {
  const { me, config } = useApp();
  const members = useLoad(() => get<{ data: Member[] }>('/members').then((r) => r.data), []);
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('developer');
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<{ tone: 'success' | 'error'; text: string } | null>(null);
  const [link, setLink] = useState<InviteResult | null>(null);
  const [removing, setRemoving] = useState<Member | null>(null);
  // An owner turning off a member's second factor (a lost device; issue 18 item 4).
  const [resetting, setResetting] = useState<Member | null>(null);
  /** The alert e-mail choice being saved (shown at once, the box disabled until saved); null: none. */
  const [savingAlerts, setSavingAlerts] = useState<boolean | null>(null);

  const myRank = RANK[me.user.role];
  const manages = myRank >= RANK.admin;
  const grantable = ROLES.filter((r) => RANK[r] <= myRank);
  /** Whether I may change or remove `m` (the server checks it again). */
  const canManage = (m: Member) =>
    m.you || (manages && (m.role !== 'owner' || me.user.role === 'owner'));

  const invited = (r: InviteResult, again: boolean) => {
    if (r.emailed) {
      setLink(null);
      setMessage({
        tone: 'success',
        text: `Invitation ${again ? 'sent again' : 'sent'} to ${r.member.email}. The link works once, for 7 days.`,
      });
    } else {
      setMessage(null);
      setLink(r);
    }
  };

  const invite = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setMessage(null);
    try {
      const r = await post<InviteResult>('/members', { email: email.trim(), role });
      setEmail('');
      invited(r, false);
      await members.reload();
    } catch (err) {
      setMessage({ tone: 'error', text: `Could not invite: ${explain(err)}` });
    } finally {
      setBusy(false);
    }
  };

  const inviteAgain = async (m: Member) => {
    try {
      invited(await post<InviteResult>(`/members/${encodeURIComponent(m.id)}/invite`), true);
    } catch (err) {
      setMessage({ tone: 'error', text: `Could not invite again: ${explain(err)}` });
    }
  };

  const changeRole = async (m: Member, next: Role) => {
    try {
      const r = await post<Member & { keys_narrowed?: KeyChange[] }>(
        `/members/${encodeURIComponent(m.id)}/role`,
        { role: next },
      );
      const narrowed = r.keys_narrowed ?? [];
      setMessage({
        tone: 'success',
        text: `${m.email} is now ${next}.${narrowed.length > 0 ? ` ${keysSentence(narrowed)} made by them now ${narrowed.length === 1 ? 'does' : 'do'} at most what a ${next} can.` : ''}`,
      });
      if (m.you) location.reload();
      else await members.reload();
    } catch (err) {
      setMessage({ tone: 'error', text: `Could not change the role: ${explain(err)}` });
      await members.reload();
    }
  };

  const resetTwoFactor = async (m: Member) => {
    setMessage(null);
    try {
      await del(`/members/${encodeURIComponent(m.id)}/two-factor`);
      setMessage({
        tone: 'success',
        text: `Two-factor sign-in of ${m.email} is off: they sign in with their password and set up a new device${me.account.require_two_factor ? ' before anything else (this account requires it)' : ''}.`,
      });
      await members.reload();
    } catch (err) {
      setMessage({ tone: 'error', text: `Could not turn it off: ${explain(err)}` });
    } finally {
      setResetting(null);
    }
  };

  const setAlerts = async (on: boolean) => {
    setSavingAlerts(on);
    setMessage(null);
    try {
      await put<Member>('/members/me/alerts', { alert_emails: on });
      setMessage({
        tone: 'success',
        text: on
          ? config.email
            ? 'Alert e-mails on: you get an e-mail when a watch starts failing, recovers or is paused.'
            : 'Alert e-mails on. E-mail is off on this deployment, so alerts show only as a banner for now.'
          : 'Alert e-mails off: alerts still show as a banner in the console.',
      });
      await members.reload();
    } catch (err) {
      setMessage({ tone: 'error', text: `Could not change your alert e-mails: ${explain(err)}` });
      await members.reload();
    } finally {
      setSavingAlerts(null);
    }
  };

  const remove = async (m: Member) => {
    try {
      const r = await del<{ keys_revoked?: KeyChange[] } | undefined>(
        `/members/${encodeURIComponent(m.id)}`,
      );
      if (m.you) {
        location.assign(`${BASE}/login`);
        return;
      }
      const revoked = r?.keys_revoked ?? [];
      setMessage({
        tone: 'success',
        text: `${m.email} was removed: their sessions ended.${revoked.length > 0 ? ` ${keysSentence(revoked)} made by them ${revoked.length === 1 ? 'was' : 'were'} revoked.` : ''}`,
      });
      await members.reload();
    } catch (err) {
      setMessage({ tone: 'error', text: `Could not remove: ${explain(err)}` });
    } finally {
      setRemoving(null);
    }
  };

  const list = members.data;
  return (
    <section>
      <PageHeader
        title="Members"
        description={
          <>
            Everyone who signs in to this account, with their role, whether two-factor sign-in is on
            and whether alerts are e-mailed to them. You are <strong>{me.user.email}</strong> (
            {me.user.role}).
          </>
        }
      />
      <div aria-live="polite">
        {message && (
          <Notice tone={message.tone} onDismiss={() => setMessage(null)}>
            {message.text}
          </Notice>
        )}
      </div>
      {link?.link && (
        <section class="secret-once" aria-label="Invitation link">
          <h3>Invitation link for {link.member.email}</h3>
          <p>
            <strong>E-mail is off on this deployment:</strong> send this link to {link.member.email}{' '}
            yourself. It works once, until <Time iso={link.expires_at} />.
          </p>
          <div class="secret-value">
            <code class="mono" data-testid="invite-link">
              {link.link}
            </code>
            <CopyButton text={link.link} label="Copy link" />
          </div>
          <button type="button" class="btn btn-secondary" onClick={() => setLink(null)}>
            Done
          </button>
        </section>
      )}
      {manages && (
        <form class="card form-card inline-form" onSubmit={invite} aria-labelledby="invite-title">
          <h2 id="invite-title" class="card-title">
            Invite a member
          </h2>
          {!config.email && (
            <p class="muted">E-mail is off: you get the invitation link here to pass on.</p>
          )}
          <div class="inline-fields">
            <Field label="E-mail">
              {({ id, describedBy }) => (
                <input
                  id={id}
                  type="email"
                  required
                  maxLength={320}
                  aria-describedby={describedBy}
                  value={email}
                  onInput={(e) => setEmail(e.currentTarget.value)}
                />
              )}
            </Field>
            <Field label="Role" hint={ROLE_TEXT[role]}>
              {({ id, describedBy }) => (
                <select
                  id={id}
                  aria-describedby={describedBy}
                  value={role}
                  onChange={(e) => setRole(e.currentTarget.value as Role)}
                >
                  {grantable.map((r) => (
                    <option key={r} value={r}>
                      {r}
                    </option>
                  ))}
                </select>
              )}
            </Field>
            <button type="submit" class="btn btn-primary" disabled={busy}>
              {busy ? 'Inviting…' : 'Invite'}
            </button>
          </div>
        </form>
      )}
      {members.error !== undefined && (
        <Notice tone="error">Could not load members: {describeError(members.error)}</Notice>
      )}
      {list === undefined ? (
        members.error === undefined && <Loading label="Loading members…" />
      ) : (
        <table class="table">
          <thead>
            <tr>
              <th scope="col">E-mail</th>
              <th scope="col">Role</th>
              <th scope="col">Status</th>
              <th scope="col">Since</th>
              <th scope="col">Two-factor</th>
              <th scope="col">Alert e-mails</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.map((m) => (
              <tr key={m.id}>
                <td data-label="E-mail">
                  {m.email} {m.you && <span class="muted">(you)</span>}
                </td>
                <td data-label="Role">
                  {canManage(m) ? (
                    <select
                      aria-label={`Role of ${m.email}`}
                      value={m.role}
                      onChange={(e) => void changeRole(m, e.currentTarget.value as Role)}
                    >
                      {ROLES.filter((r) => RANK[r] <= myRank || r === m.role).map((r) => (
                        <option key={r} value={r}>
                          {r}
                        </option>
                      ))}
                    </select>
                  ) : (
                    <Pill tone={ROLE_TONE[m.role]}>{m.role.toUpperCase()}</Pill>
                  )}
                </td>
                <td data-label="Status">
                  {m.status === 'active' ? (
                    <Pill tone="green">ACTIVE</Pill>
                  ) : (
                    <Pill tone="amber">INVITED</Pill>
                  )}
                </td>
                <td data-label="Since">
                  <Time iso={m.joined_at ?? m.created_at} />
                </td>
                <td data-label="Two-factor">
                  {m.two_factor ? <Pill tone="green">ON</Pill> : <Pill tone="gray">OFF</Pill>}
                </td>
                <td data-label="Alert e-mails">
                  {m.you ? (
                    <label class="check-inline">
                      <input
                        type="checkbox"
                        checked={savingAlerts ?? m.alert_emails}
                        disabled={savingAlerts !== null}
                        onChange={(e) => void setAlerts(e.currentTarget.checked)}
                      />
                      Send alerts to me
                    </label>
                  ) : m.alert_emails ? (
                    <Pill tone="green">ON</Pill>
                  ) : (
                    <Pill tone="gray">OFF</Pill>
                  )}
                </td>
                <td data-label="Actions">
                  <span class="row-actions">
                    {manages && m.status === 'invited' && (
                      <button
                        type="button"
                        class="btn btn-secondary btn-small"
                        onClick={() => void inviteAgain(m)}
                      >
                        Invite again
                      </button>
                    )}
                    {me.user.role === 'owner' && !m.you && m.two_factor && (
                      <button
                        type="button"
                        class="btn btn-secondary btn-small"
                        aria-label={`Turn off two-factor sign-in of ${m.email}`}
                        onClick={() => setResetting(m)}
                      >
                        Turn off 2FA
                      </button>
                    )}
                    {canManage(m) && (
                      <button
                        type="button"
                        class="btn btn-danger-outline btn-small"
                        aria-label={m.you ? 'Leave this account' : `Remove ${m.email}`}
                        onClick={() => setRemoving(m)}
                      >
                        {m.you ? 'Leave' : 'Remove'}
                      </button>
                    )}
                  </span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p class="muted roles-note">
        Roles: <strong>owner</strong> {ROLE_TEXT.owner}; <strong>admin</strong> {ROLE_TEXT.admin};{' '}
        <strong>developer</strong> {ROLE_TEXT.developer}; <strong>viewer</strong> {ROLE_TEXT.viewer}
        . The last owner cannot leave or be demoted.
      </p>
      <p class="muted roles-note">
        Alert e-mails: when a watch's deliveries keep failing, recover, or the watch is paused, an
        e-mail goes to the members who turned them on (owners and admins start on, developers and
        viewers off); each member switches their own. The banner in the console shows every alert
        either way.{!config.email && ' E-mail is off on this deployment: no e-mail is sent.'}
      </p>
      {resetting && (
        <ConfirmDialog
          title={`Turn off two-factor sign-in of ${resetting.email}?`}
          confirmLabel="Turn it off"
          danger
          onConfirm={() => resetTwoFactor(resetting)}
          onCancel={() => setResetting(null)}
        >
          <p>
            For a member who lost their phone and their recovery codes. Until they set up a new
            device, their password alone signs them in.
          </p>
        </ConfirmDialog>
      )}
      {removing && (
        <ConfirmDialog
          title={removing.you ? 'Leave this account?' : `Remove ${removing.email}?`}
          confirmLabel={removing.you ? 'Leave' : 'Remove member'}
          danger
          onConfirm={() => remove(removing)}
          onCancel={() => setRemoving(null)}
        >
          <p>
            {removing.you
              ? 'You are signed out at once and cannot sign in to this account again unless invited.'
              : `${removing.email} is signed out at once and can no longer sign in to this account.`}
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}
