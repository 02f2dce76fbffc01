/**
 * API keys: create (shown once), list, revoke with confirmation. Creating and revoking need the
 * developer role (src/console/routes/keys.ts); below it the list is shown without them. Each key
 * shows who made it and its role (never more than its maker's, issue 27); the list filters by
 * maker.
 */
import { useEffect, useState } from 'preact/hooks';
import { del, describeError, get, post } from '../api';
import {
  CodeBlock,
  ConfirmDialog,
  EmptyState,
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
import { useApp } from '../state';
import type { KeyInfo } from '../types';

export function KeysPage() {
  const [madeBy, setMadeBy] = useState('');
  const keys = useLoad(
    () =>
      get<{ data: KeyInfo[] }>(
        madeBy === '' ? '/keys' : `/keys?made_by=${encodeURIComponent(madeBy)}`,
      ).then((r) => r.data),
    [madeBy],
  );
  // The makers the filter offers: those of the whole list (read while unfiltered).
  const [makers, setMakers] = useState<Map<string, string>>(new Map());
  useEffect(() => {
    if (madeBy !== '' || !keys.data) return;
    const seen = new Map<string, string>();
    for (const k of keys.data) {
      if (k.created_by.type === 'cli') seen.set('cli', 'the CLI (operator)');
      else seen.set(k.created_by.user_id, k.created_by.email ?? k.created_by.user_id);
    }
    setMakers(seen);
  }, [keys.data, madeBy]);
  const [name, setName] = useState('');
  const [readOnly, setReadOnly] = useState(false);
  const [busy, setBusy] = useState(false);
  const [secret, setSecret] = useState<{ key: KeyInfo; secret: string } | null>(null);
  const [message, setMessage] = useState<{ tone: 'success' | 'error'; text: string } | null>(null);
  const [revoking, setRevoking] = useState<KeyInfo | null>(null);
  const { role, can, explain } = useRole();
  const manages = can('developer');

  const create = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setMessage(null);
    try {
      const r = await post<{ key: KeyInfo; secret: string }>('/keys', {
        ...(name.trim() === '' ? {} : { name: name.trim() }),
        ...(readOnly ? { scope: 'read' } : {}),
      });
      setSecret(r);
      setName('');
      setReadOnly(false);
      keys.setData([r.key, ...(keys.data ?? [])]);
    } catch (err) {
      setMessage({ tone: 'error', text: `Could not create the key: ${explain(err)}` });
    } finally {
      setBusy(false);
    }
  };

  const revoke = async (k: KeyInfo) => {
    try {
      const r = await del<KeyInfo>(`/keys/${encodeURIComponent(k.id)}`);
      keys.setData((keys.data ?? []).map((x) => (x.id === k.id ? r : x)));
      setMessage({
        tone: 'success',
        text: `Key ${k.name ?? k.prefix} revoked: it is refused from the next request on.`,
      });
    } catch (err) {
      setMessage({ tone: 'error', text: `Could not revoke the key: ${explain(err)}` });
    } finally {
      setRevoking(null);
    }
  };

  const list = keys.data;
  const testMode = useApp().config.environment === 'test';
  return (
    <section>
      <PageHeader
        title="API keys"
        description={
          <>
            Keys authenticate your backend on <code>/v1/*</code> as{' '}
            <code>Authorization: Bearer {testMode ? 'tw_test_' : 'tw_live_'}…</code>. Only a hash is
            stored.
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
      {secret && (
        <SecretOnce
          title="Your new API key"
          secret={secret.secret}
          copyLabel="Copy key"
          onDone={() => setSecret(null)}
        >
          <CodeBlock
            label="Try it"
            copyLabel="Copy curl"
            code={`curl ${location.origin}/v1/watches -H "Authorization: Bearer ${secret.secret}"`}
          />
        </SecretOnce>
      )}
      {manages ? (
        <form class="card form-card inline-form" onSubmit={create} aria-labelledby="new-key-title">
          <h2 id="new-key-title" class="card-title">
            {list && list.length === 0 ? 'Create your first API key' : 'Create an API key'}
          </h2>
          <div class="inline-fields">
            <Field label="Name (optional)" hint="Where the key is used, e.g. “payments-prod”.">
              {({ id, describedBy }) => (
                <input
                  id={id}
                  maxLength={100}
                  aria-describedby={describedBy}
                  value={name}
                  onInput={(e) => setName(e.currentTarget.value)}
                />
              )}
            </Field>
            <label class="check-inline">
              <input
                type="checkbox"
                checked={readOnly}
                onChange={(e) => setReadOnly(e.currentTarget.checked)}
              />{' '}
              Read-only (GET requests only: for dashboards and agents)
            </label>
            <button type="submit" class="btn btn-primary" disabled={busy}>
              {busy ? 'Creating…' : 'Create key'}
            </button>
          </div>
        </form>
      ) : (
        <RoleNote role={role} needed="developer" what="to create and revoke keys" />
      )}
      {keys.error !== undefined && (
        <Notice tone="error">Could not load keys: {describeError(keys.error)}</Notice>
      )}
      {makers.size > 1 && (
        <Field label="Made by">
          {({ id }) => (
            <select id={id} value={madeBy} onChange={(e) => setMadeBy(e.currentTarget.value)}>
              <option value="">Anyone</option>
              {[...makers].map(([v, label]) => (
                <option key={v} value={v}>
                  {label}
                </option>
              ))}
            </select>
          )}
        </Field>
      )}
      {list === undefined ? (
        keys.error === undefined && <Loading label="Loading keys…" />
      ) : list.length === 0 ? (
        <EmptyState title="No API keys yet">
          <p>
            {manages
              ? 'Create your first API key above, then create watches from your backend.'
              : 'An owner, admin or developer of the account creates them.'}
          </p>
        </EmptyState>
      ) : (
        <table class="table">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Key</th>
              <th scope="col">Made by</th>
              <th scope="col">Role</th>
              <th scope="col">Access</th>
              <th scope="col">Created</th>
              <th scope="col">Last used</th>
              <th scope="col">Status</th>
              {manages && (
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              )}
            </tr>
          </thead>
          <tbody>
            {list.map((k) => (
              <tr key={k.id} class={k.revoked_at ? 'revoked' : ''}>
                <td data-label="Name">{k.name ?? <span class="muted">unnamed</span>}</td>
                <td data-label="Key">
                  <code class="mono" title={k.id}>
                    {k.prefix}…
                  </code>
                </td>
                <td data-label="Made by">
                  {k.created_by.type === 'cli' ? (
                    <span class="muted">CLI (operator)</span>
                  ) : (
                    (k.created_by.email ?? k.created_by.user_id)
                  )}
                </td>
                <td data-label="Role">{k.role}</td>
                <td data-label="Access">
                  {k.scope === 'read' ? (
                    <Pill tone="gray">READ-ONLY</Pill>
                  ) : (
                    <span class="muted">full</span>
                  )}
                </td>
                <td data-label="Created">
                  <Time iso={k.created_at} />
                </td>
                <td data-label="Last used">
                  {k.last_used_at ? (
                    <Time iso={k.last_used_at} rel />
                  ) : (
                    <span class="muted">never</span>
                  )}
                </td>
                <td data-label="Status">
                  {k.revoked_at ? (
                    <span>
                      <Pill tone="gray">REVOKED</Pill> <Time iso={k.revoked_at} />
                    </span>
                  ) : (
                    <Pill tone="green">ACTIVE</Pill>
                  )}
                </td>
                {manages && (
                  <td data-label="Actions">
                    {!k.revoked_at && (
                      <button
                        type="button"
                        class="btn btn-danger-outline btn-small"
                        aria-label={`Revoke key ${k.name ?? k.prefix}`}
                        onClick={() => setRevoking(k)}
                      >
                        Revoke
                      </button>
                    )}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {revoking && (
        <ConfirmDialog
          title="Revoke this API key?"
          confirmLabel="Revoke key"
          danger
          onConfirm={() => revoke(revoking)}
          onCancel={() => setRevoking(null)}
        >
          <p>
            <strong>{revoking.name ?? 'This key'}</strong> (
            <code class="mono">{revoking.prefix}…</code>) is refused from the next request on.
            Anything still using it stops working. This cannot be undone.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}
