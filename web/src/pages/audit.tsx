/**
 * Audit log (issue 18 item 6): every change to the account, newest first, with who made it, from
 * which address, and what it touched. Filters (actor, action, time range) live in the URL, so a
 * filtered view can be bookmarked; older entries come a page at a time (cursor). Reading it needs
 * the admin role (src/console/routes/audit.ts): below it the page says so and asks nothing.
 */
import { useEffect, useState } from 'preact/hooks';
import { describeError, get, query } from '../api';
import {
  EmptyState,
  Loading,
  Mono,
  Notice,
  PageHeader,
  Pill,
  Time,
  type Tone,
} from '../components/ui';
import { describeAgent, isoToLocalInput, localInputToIso, middle } from '../format';
import { useLoad } from '../hooks';
import { RoleNote, useRole } from '../roles';
import { BASE, Link, navigate, useLocation } from '../router';
import type { AuditAction, AuditEntry, AuditLogPage, KeyInfo } from '../types';

const PAGE_SIZE = 50;
const PATH = `${BASE}/audit`;

interface AuditFilters {
  actor: string;
  action: string;
  since: string;
  until: string;
}

function readFilters(search: URLSearchParams): AuditFilters {
  return {
    actor: search.get('actor') ?? '',
    action: search.get('action') ?? '',
    since: search.get('since') ?? '',
    until: search.get('until') ?? '',
  };
}

/** Names of the groups of actions (the part before the dot). */
const GROUPS: Record<string, string> = {
  account: 'Account and password',
  session: 'Sign-ins and sessions',
  api_key: 'API keys',
  watch: 'Watches',
  event: 'Redelivery',
  telegram: 'Telegram',
  secrets: 'Secrets',
};

const ACTOR_TONE: Record<string, Tone> = { user: 'blue', api_key: 'amber', system: 'gray' };
const ACTOR_KIND: Record<string, string> = { user: 'User', api_key: 'API key', system: 'System' };

function Filters({
  filters,
  actions,
  keys,
}: {
  filters: AuditFilters;
  actions: AuditAction[] | undefined;
  keys: KeyInfo[] | undefined;
}) {
  const [f, setF] = useState(filters);
  useEffect(() => setF(filters), [filters.actor, filters.action, filters.since, filters.until]);
  const groups = [...new Set((actions ?? []).map((a) => a.name.split('.')[0] ?? ''))];
  const active = filters.actor || filters.action || filters.since || filters.until;
  const apply = (e: Event) => {
    e.preventDefault();
    navigate(PATH + query({ ...f }));
  };
  return (
    <form class="filters" onSubmit={apply} aria-label="Filter the audit log">
      <div class="field">
        <label for="a-actor">Who</label>
        <select
          id="a-actor"
          value={f.actor}
          onChange={(e) => setF({ ...f, actor: e.currentTarget.value })}
        >
          <option value="">Anyone</option>
          <option value="user">Console users</option>
          <option value="api_key">Any API key</option>
          {keys?.map((k) => (
            <option key={k.id} value={`api_key:${k.id}`}>
              API key {k.prefix}
              {k.name ? ` · ${k.name}` : ''}
            </option>
          ))}
          <option value="system">tronwatch (CLI, Telegram bot)</option>
          {f.actor &&
            !['user', 'api_key', 'system'].includes(f.actor) &&
            !keys?.some((k) => `api_key:${k.id}` === f.actor) && (
              <option value={f.actor}>{f.actor}</option>
            )}
        </select>
      </div>
      <div class="field">
        <label for="a-action">Action</label>
        <select
          id="a-action"
          value={f.action}
          onChange={(e) => setF({ ...f, action: e.currentTarget.value })}
        >
          <option value="">Any action</option>
          {groups.map((g) => (
            <optgroup key={g} label={GROUPS[g] ?? g}>
              <option value={`${g}.*`}>All: {GROUPS[g] ?? g}</option>
              {actions
                ?.filter((a) => a.name.startsWith(`${g}.`))
                .map((a) => (
                  <option key={a.name} value={a.name}>
                    {a.description}
                  </option>
                ))}
            </optgroup>
          ))}
          {f.action && !actions?.some((a) => a.name === f.action) && !f.action.endsWith('.*') && (
            <option value={f.action}>{f.action}</option>
          )}
        </select>
      </div>
      <div class="field">
        <label for="a-since">From (your time)</label>
        <input
          id="a-since"
          type="datetime-local"
          value={f.since ? isoToLocalInput(f.since) : ''}
          onInput={(e) => setF({ ...f, since: localInputToIso(e.currentTarget.value) })}
        />
      </div>
      <div class="field">
        <label for="a-until">To (your time)</label>
        <input
          id="a-until"
          type="datetime-local"
          value={f.until ? isoToLocalInput(f.until) : ''}
          onInput={(e) => setF({ ...f, until: localInputToIso(e.currentTarget.value) })}
        />
      </div>
      <div class="filters-actions">
        <button type="submit" class="btn btn-primary">
          Apply filters
        </button>
        {active && (
          <button type="button" class="btn btn-secondary" onClick={() => navigate(PATH)}>
            Clear
          </button>
        )}
      </div>
    </form>
  );
}

/** The target, linked when the console has a page for it. */
function Target({ entry }: { entry: AuditEntry }) {
  const id = entry.target_id;
  if (id === null) return <span class="muted">—</span>;
  if (id.startsWith('evt_')) {
    return (
      <Link href={`${BASE}/events/${encodeURIComponent(id)}`} class="mono" title={id}>
        {middle(id, 6)}
      </Link>
    );
  }
  return <Mono value={id} keep={6} copy={false} />;
}

function Detail({ detail }: { detail: AuditEntry['detail'] }) {
  const entries = Object.entries(detail).filter(([, v]) => v !== null && v !== '');
  if (entries.length === 0) return <span class="muted">—</span>;
  return (
    <dl class="audit-detail">
      {entries.map(([k, v]) =>
        k === 'user_agent' && typeof v === 'string' ? (
          <div key={k}>
            <dt>device</dt>
            <dd title={v}>{describeAgent(v)}</dd>
          </div>
        ) : (
          <div key={k}>
            <dt>{k.replace(/_/g, ' ')}</dt>
            <dd>{String(v)}</dd>
          </div>
        ),
      )}
    </dl>
  );
}

function Actor({ actor }: { actor: AuditEntry['actor'] }) {
  return (
    <div class="audit-actor">
      <Pill tone={ACTOR_TONE[actor.type] ?? 'gray'}>{ACTOR_KIND[actor.type] ?? actor.type}</Pill>{' '}
      <span class="audit-actor-name">{actor.label ?? actor.id ?? 'unknown'}</span>
      {actor.session_id && (
        <div class="sub mono" title={`Session ${actor.session_id}`}>
          session {middle(actor.session_id, 5)}
        </div>
      )}
    </div>
  );
}

function AuditTable({
  rows,
  describe,
}: {
  rows: AuditEntry[];
  describe: (name: string) => string;
}) {
  return (
    <table class="table audit-table">
      <thead>
        <tr>
          <th scope="col">When</th>
          <th scope="col">Who</th>
          <th scope="col">Action</th>
          <th scope="col">Target</th>
          <th scope="col">Details</th>
          <th scope="col">Client address</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((e) => (
          <tr key={e.id}>
            <td data-label="When" class="audit-when">
              <Time iso={e.at} short />
            </td>
            <td data-label="Who">
              <Actor actor={e.actor} />
            </td>
            <td data-label="Action">
              <span class="audit-action">{describe(e.action)}</span>
              <div class="sub mono">{e.action}</div>
            </td>
            <td data-label="Target" class="audit-target">
              <Target entry={e} />
            </td>
            <td data-label="Details">
              <Detail detail={e.detail} />
            </td>
            <td data-label="Client IP">
              {e.client_ip === null ? (
                <span class="muted">—</span>
              ) : (
                <code class="mono">{e.client_ip}</code>
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function AuditPage() {
  const { role, can } = useRole();
  if (!can('admin')) {
    return (
      <section>
        <PageHeader
          title="Audit log"
          description="Every change made to the account: who, what, when and from where."
        />
        <RoleNote role={role} needed="admin" what="to read it" />
      </section>
    );
  }
  return <AuditLog />;
}

/** The log itself, for an owner or admin. */
function AuditLog() {
  const { search } = useLocation();
  const filters = readFilters(search);
  const actions = useLoad(
    () => get<{ data: AuditAction[] }>('/audit/actions').then((r) => r.data),
    [],
  );
  const keys = useLoad(() => get<{ data: KeyInfo[] }>('/keys').then((r) => r.data), []);
  const [rows, setRows] = useState<AuditEntry[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [olderBusy, setOlderBusy] = useState(false);
  const [olderError, setOlderError] = useState<unknown>(undefined);
  const params = { limit: PAGE_SIZE, ...filters };
  const first = useLoad(async () => {
    const page = await get<AuditLogPage>(`/audit${query(params)}`);
    setRows(page.data);
    setNext(page.next_cursor);
    return page;
  }, [filters.actor, filters.action, filters.since, filters.until]);
  const older = async () => {
    if (next === null) return;
    setOlderBusy(true);
    setOlderError(undefined);
    try {
      const page = await get<AuditLogPage>(`/audit${query({ ...params, cursor: next })}`);
      setRows((r) => [...r, ...page.data]);
      setNext(page.next_cursor);
    } catch (e) {
      setOlderError(e);
    } finally {
      setOlderBusy(false);
    }
  };
  const byName = new Map((actions.data ?? []).map((a) => [a.name, a.description]));
  const describe = (name: string) => byName.get(name) ?? name;
  const filtered = Boolean(filters.actor || filters.action || filters.since || filters.until);

  let body = null;
  if (first.error !== undefined) {
    body = (
      <Notice tone="error">
        Could not load the audit log: {describeError(first.error)}{' '}
        <button type="button" class="btn btn-link" onClick={() => void first.reload()}>
          Retry
        </button>
      </Notice>
    );
  } else if (first.data === undefined) {
    body = <Loading label="Loading the audit log…" />;
  } else if (rows.length === 0) {
    body = filtered ? (
      <EmptyState title="No entries match these filters">
        <p>Widen the time range, or choose another person, key or action.</p>
      </EmptyState>
    ) : (
      <EmptyState title="Nothing recorded yet">
        <p>Changes to keys, watches, sessions and deliveries appear here as they are made.</p>
      </EmptyState>
    );
  } else {
    body = (
      <>
        <p class="muted" aria-live="polite">
          Showing {rows.length} {rows.length === 1 ? 'entry' : 'entries'}
          {next === null ? ' (all)' : ''}, newest first.
        </p>
        <AuditTable rows={rows} describe={describe} />
        <div class="pager">
          {next !== null && (
            <button
              type="button"
              class="btn btn-secondary"
              disabled={olderBusy}
              onClick={() => void older()}
            >
              {olderBusy ? 'Loading…' : 'Older'}
            </button>
          )}
          {olderError !== undefined && (
            <Notice tone="error">Could not load older entries: {describeError(olderError)}</Notice>
          )}
        </div>
      </>
    );
  }

  return (
    <section>
      <PageHeader
        title="Audit log"
        description="Every change made to this account in the console or through the API: who made it, from which address, and when. Keys, secrets and passwords are never recorded."
      />
      <Filters filters={filters} actions={actions.data} keys={keys.data} />
      {body}
    </section>
  );
}
