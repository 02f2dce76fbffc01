/**
 * The account page a payment team keeps open: quota, rate limit, 24 h deliveries, chain lag. Read
 * by every role; the first steps it suggests to an empty account are a developer's (keys, watches,
 * test sends: src/console/routes/keys.ts, watches.ts), so a viewer is told whom to ask instead.
 */
import { useState } from 'preact/hooks';
import { describeError, get } from '../api';
import { CodeBlock, Loading, Notice, PageHeader, Pill, Time } from '../components/ui';
import { plural, seconds } from '../format';
import { useInterval, useLoad } from '../hooks';
import { RoleNote, useRole } from '../roles';
import { BASE, Link } from '../router';
import { useApp } from '../state';
import type { KeyInfo, Overview } from '../types';
import { curlCreateWatch } from './watches';

const REFRESH_MS = 10_000;

function Meter({ used, limit, label }: { used: number; limit: number; label: string }) {
  const ratio = limit > 0 ? Math.min(1, used / limit) : 0;
  const tone = ratio >= 1 ? 'red' : ratio >= 0.8 ? 'amber' : 'green';
  return (
    // The numbers above the bar say the same: the bar is decoration for screen readers.
    <div class="meter" aria-hidden="true" title={label}>
      <div class={`meter-fill meter-${tone}`} style={{ width: `${ratio * 100}%` }} />
    </div>
  );
}

/**
 * Chain state in words, from tronwatch's own lag in blocks behind the node's solidified head
 * (3 s a block: 40 blocks is the 2 minutes solidification normally takes). The age of the newest
 * scanned block is the node's business: a node replaying old blocks (a demo or test chain) serves
 * blocks months old while tronwatch is fully in sync with it (OldBlocksNote explains it).
 */
function chainHealth(c: Overview['chain']): {
  tone: 'green' | 'amber' | 'red' | 'gray';
  text: string;
} {
  if (c.scanned_block === null) return { tone: 'gray', text: 'Starting' };
  if (c.lag_blocks === null) {
    if (c.lag_seconds === null) return { tone: 'gray', text: 'Starting' };
    return c.lag_seconds <= 120
      ? { tone: 'green', text: 'In sync' }
      : { tone: 'amber', text: 'Catching up' };
  }
  if (c.lag_blocks <= 40) return { tone: 'green', text: 'In sync' };
  if (c.lag_blocks <= 300) return { tone: 'amber', text: 'Catching up' };
  return { tone: 'red', text: 'Behind' };
}

/** In sync with the node, but the node's newest block is old: say why, in plain words. */
function OldBlocksNote({ c }: { c: Overview['chain'] }) {
  if (c.lag_seconds === null || c.lag_seconds <= 900) return null;
  if (c.lag_blocks === null || c.lag_blocks > 40) return null;
  return (
    <p class="muted">
      tronwatch has scanned every block the node has solidified, but the newest of them was made{' '}
      {seconds(c.lag_seconds)} ago: the node serves old blocks (a demo or replayed chain), or the
      node itself is behind the network. Live mainnet transfers appear once it serves current
      blocks.
    </p>
  );
}

export function OverviewPage() {
  const o = useLoad(() => get<Overview>('/overview'), []);
  const [updated, setUpdated] = useState<string | null>(null);
  useInterval(() => {
    void o.reload().then(() => setUpdated(new Date().toISOString()));
  }, REFRESH_MS);

  return (
    <section>
      <PageHeader
        title="Overview"
        description={
          <>
            Refreshes every 10 s
            {updated && (
              <>
                {' '}
                · updated <Time iso={updated} rel />
              </>
            )}
          </>
        }
      />
      {o.error !== undefined && (
        <Notice tone="error">Could not load the overview: {describeError(o.error)}</Notice>
      )}
      {o.data === undefined ? (
        o.error === undefined && <Loading />
      ) : (
        <>
          {o.data.watches.active + o.data.watches.paused === 0 && <GettingStarted />}
          <OverviewCards o={o.data} />
        </>
      )}
    </section>
  );
}

/** For an account without watches: the three steps from nothing to a first webhook. */
function GettingStarted() {
  const { role, can } = useRole();
  if (!can('developer')) {
    return (
      <article class="card getting-started" aria-labelledby="gs-title">
        <h2 id="gs-title" class="card-title">
          No watches yet
        </h2>
        <p>
          Deposits appear here and on the Events page once the account has a watch for a deposit
          address.
        </p>
        <RoleNote role={role} needed="developer" what="to create keys and watches" />
      </article>
    );
  }
  return <FirstSteps />;
}

/** The three steps, for a role that can take them. */
function FirstSteps() {
  const testMode = useApp().config.environment === 'test';
  const keys = useLoad(() => get<{ data: KeyInfo[] }>('/keys').then((r) => r.data), []);
  const hasKey = keys.data?.some((k) => k.revoked_at === null) ?? false;
  return (
    <article class="card getting-started" aria-labelledby="gs-title">
      <h2 id="gs-title" class="card-title">
        Get your first webhook
      </h2>
      <ol class="steps">
        <li class={hasKey ? 'done' : ''}>
          {hasKey ? (
            <>
              API key created <span class="sr-only">(done)</span>
            </>
          ) : (
            <Link href={`${BASE}/keys`}>Create your first API key</Link>
          )}
          <span class="muted"> for your backend to call /v1.</span>
        </li>
        <li>
          <Link href={`${BASE}/watches`}>Create a watch</Link>
          <span class="muted"> for a deposit address, here or from your backend:</span>
          <CodeBlock
            code={curlCreateWatch(location.origin)}
            label="Create a watch with curl"
            copyLabel="Copy curl"
          />
        </li>
        <li>
          {testMode
            ? 'Trigger a test deposit on the watch (or POST /v1/test/transfers) and check that your endpoint verifies '
            : 'Send a test event from the Watches page to check that your endpoint verifies '}
          <code>X-Signature</code> and answers 2xx.
        </li>
      </ol>
    </article>
  );
}

function OverviewCards({ o }: { o: Overview }) {
  const { can } = useRole();
  const health = chainHealth(o.chain);
  // The test environment without a test network (TRON_TESTNET_NODE_URL unset): no chain at all,
  // not one starting; its events are the triggered deposits alone.
  const unfollowed =
    o.chain.network !== 'mainnet' &&
    o.chain.solidified_head === null &&
    o.chain.scanned_block === null &&
    !o.chain.light_client;
  const ev = o.events_24h;
  return (
    <div class="cards">
      <article class="card">
        <h2 class="card-title">Plan</h2>
        <p class="stat">{o.account.plan_name}</p>
        <p class="muted">{o.account.email}</p>
      </article>

      <article class="card">
        <h2 class="card-title">Active watches</h2>
        <p class="stat">
          {o.watches.active} <span class="stat-of">of {o.watches.quota}</span>
        </p>
        <Meter used={o.watches.active} limit={o.watches.quota} label="Active watches used" />
        <p class="muted">
          {o.watches.paused} paused (not counted) ·{' '}
          <Link href={`${BASE}/watches`}>{can('developer') ? 'Manage' : 'See them'}</Link>
        </p>
      </article>

      <article class="card">
        <h2 class="card-title">API requests</h2>
        <p class="stat">
          {o.rate_limit.used} <span class="stat-of">of {o.rate_limit.limit}</span>
        </p>
        <Meter used={o.rate_limit.used} limit={o.rate_limit.limit} label="API requests used" />
        <p class="muted">Requests to /v1 in the last {o.rate_limit.window_seconds} s</p>
      </article>

      <article class="card card-wide">
        <h2 class="card-title">Events, last 24 hours</h2>
        <div class="stat-row">
          <Link class="stat-link" href={`${BASE}/events?status=DELIVERED`}>
            <span class="stat">{ev.DELIVERED}</span>
            <Pill tone="green">DELIVERED</Pill>
          </Link>
          <Link class="stat-link" href={`${BASE}/events?status=PENDING`}>
            <span class="stat">{ev.PENDING}</span>
            <Pill tone="amber">PENDING</Pill>
          </Link>
          <Link class="stat-link" href={`${BASE}/dead-letters`}>
            <span class="stat">{ev.DEAD}</span>
            <Pill tone="red">DEAD</Pill>
          </Link>
        </div>
        {ev.DEAD > 0 && (
          <p>
            <Link href={`${BASE}/dead-letters`}>
              {ev.DEAD} dead {ev.DEAD === 1 ? 'letter needs' : 'letters need'} attention →
            </Link>
          </p>
        )}
      </article>

      {unfollowed ? (
        <article class="card card-wide">
          <h2 class="card-title">
            Chain <Pill tone="gray">None followed</Pill>
          </h2>
          <p>
            This deployment follows no test network (its operator has not set{' '}
            <code>TRON_TESTNET_NODE_URL</code>), so there is no chain to sync here.
          </p>
          <p class="muted">
            Test events come from the deposits you trigger on a test watch (Trigger test deposit, or
            POST /v1/test/transfers), delivered at once like real ones.
          </p>
        </article>
      ) : (
        <article class="card card-wide">
          <h2 class="card-title">
            Chain <Pill tone={health.tone}>{health.text}</Pill>
          </h2>
          <dl class="facts">
            <div>
              <dt>Network</dt>
              <dd>TRON {o.chain.network}</dd>
            </div>
            <div>
              <dt>Solidified head</dt>
              <dd class="mono">{o.chain.solidified_head ?? '—'}</dd>
            </div>
            <div>
              <dt>Scanned up to</dt>
              <dd>
                <span class="mono">{o.chain.scanned_block ?? '—'}</span>
                {o.chain.scanned_block_time && (
                  <>
                    {' '}
                    (<Time iso={o.chain.scanned_block_time} />)
                  </>
                )}
              </dd>
            </div>
            <div>
              <dt>Behind the node</dt>
              <dd>
                {o.chain.lag_blocks === null
                  ? '—'
                  : `${o.chain.lag_blocks} ${o.chain.lag_blocks === 1 ? 'block' : 'blocks'}`}
              </dd>
            </div>
            <div>
              <dt>Newest scanned block's age</dt>
              <dd>{o.chain.lag_seconds === null ? '—' : seconds(o.chain.lag_seconds)}</dd>
            </div>
            <div>
              <dt>Finality</dt>
              <dd>
                {o.chain.light_client ? (
                  <>
                    proven by {o.chain.light_client.proven_by_srs} of{' '}
                    {o.chain.light_client.active_srs} SRs up to block{' '}
                    <span class="mono">{o.chain.light_client.final_block}</span>
                    {o.chain.light_client.known_srs < o.chain.light_client.active_srs &&
                      ` (${o.chain.light_client.known_srs} SRs' keys known)`}
                  </>
                ) : o.chain.network === 'mainnet' ? (
                  'not proven yet: the light client is reading up to its first final block'
                ) : (
                  "the test network's solidified head (no Nile checkpoint pinned)"
                )}
              </dd>
            </div>
          </dl>
          <OldBlocksNote c={o.chain} />
          {o.chain.light_client && (
            // Why "Scanned up to" can be above "Solidified head" (issue 40 item 11).
            <p class="muted">
              tronwatch decides finality itself, from the super representatives' signatures, so its
              final block usually runs ahead of the node's solidified head
              {o.chain.light_client.solidified_head_ahead_blocks !== null &&
              o.chain.light_client.solidified_head_ahead_blocks < 0
                ? ` (by ${plural(-o.chain.light_client.solidified_head_ahead_blocks, 'block')} now)`
                : ''}
              : the node's solidified head is its own view, shown for comparison, and never what
              tronwatch waits for.
            </p>
          )}
          <p class="muted">
            {o.chain.network === 'mainnet' || o.chain.light_client
              ? 'Only blocks tronwatch proved final are notified (19 of the 27 super representatives signed blocks on top, each signature checked): a transfer is notified about a minute after it is included.'
              : 'Only solidified (irreversible) blocks are notified: a transfer is notified about a minute after it is included.'}
          </p>
        </article>
      )}
    </div>
  );
}
