/**
 * `tronwatch doctor` (issue 20 item 5; docs/operating.md "Checking a deployment"): checks a deployment's
 * configuration and everything it depends on, and says for each problem what to do.
 *
 * Checks, in order (types.ts CHECK_NAMES): `config` (the environment parses: src/config.ts, and
 * the files it names exist), then, with a valid configuration, `database`, `redis`, every
 * provider of TRON_NODE_URL (`node.*`), every provider of TRON_TESTNET_NODE_URL (`testnet.*`;
 * unset: one `testnet` line, a pass, saying test mode has only POST /v1/test/transfers
 * deposits), `clock`, `secret_key`, `stored_secrets`, `public_url`, `telegram`, then the running
 * service: `service`, `service.light_client`, `service.ingest`, `service.workers` (checks.ts,
 * node.ts, service.ts: each documents its rule). Nothing is written, nothing secret is printed.
 * The run is OK, and the command exits 0, when no check failed (`warn` and `skip` do not fail;
 * with `strict`, `warn` does). `only` runs one check (or one family: `node`, `testnet`).
 */
import fs from 'node:fs';
import { type Config, ConfigError, loadConfig } from '../config.js';
import {
  checkDatabase,
  checkPublicUrls,
  checkRedis,
  checkSecretKey,
  checkTelegram,
} from './checks.js';
import { checkClock, checkProvider, checkProviderProof, type NodeFindings } from './node.js';
import {
  checkIngest,
  checkService,
  checkStoredSecrets,
  checkWorkers,
  openStoredState,
  serviceUrl,
} from './service.js';
import { CHECK_NAMES, type CheckResult, type DoctorOptions, type DoctorReport } from './types.js';

export type { CheckResult, CheckStatus, DoctorOptions, DoctorReport } from './types.js';
export { CHECK_NAMES } from './types.js';

/** `config`: the environment parses, and the files it names exist. */
function checkConfig(env: Record<string, string | undefined>): {
  result: CheckResult;
  cfg?: Config;
} {
  let cfg: Config;
  try {
    cfg = loadConfig(env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return {
      result: {
        check: 'config',
        status: 'fail',
        detail: `invalid: ${err.problems.join('; ')}`,
        fix: 'correct the variables named (docs/operating.md "Configuration" lists each with its bounds)',
      },
    };
  }
  if (cfg.delivery.caFile && !fs.existsSync(cfg.delivery.caFile)) {
    return {
      cfg,
      result: {
        check: 'config',
        status: 'fail',
        detail: `WEBHOOK_CA_FILE ${cfg.delivery.caFile} does not exist (the service refuses to start)`,
        fix: 'correct WEBHOOK_CA_FILE or unset it',
      },
    };
  }
  const n = cfg.node.providers.length;
  return {
    cfg,
    result: {
      check: 'config',
      status: 'pass',
      detail: `valid: ${n} node provider${n > 1 ? 's' : ''} (quorum ${cfg.node.quorum}), ${cfg.database.url ? 'PostgreSQL' : 'embedded database'}, ${cfg.redis.url ? 'Redis' : 'no Redis'}`,
    },
  };
}

/** True when the `only` option selects `check` (module doc of DoctorOptions.only). */
export function selects(only: string | undefined, check: string): boolean {
  if (only === undefined || check === only) return true;
  // `testnet` is a check (TRON_TESTNET_NODE_URL unset) and the family of its providers' checks.
  if (only === 'testnet') return check.startsWith('testnet.');
  // A family (`node`) when it is not itself a check (`service` is one: only it).
  return !(CHECK_NAMES as readonly string[]).includes(only) && check.startsWith(`${only}.`);
}

/**
 * Run every check (or the one `opts.only` names) against the configuration `env` describes.
 * @param env a process.env-like record (the command passes process.env).
 * @returns the report; never throws for a failed check (each is a result).
 * @throws RangeError when `opts.only` names no check (the message lists them).
 */
export async function runDoctor(
  env: Record<string, string | undefined>,
  opts: DoctorOptions = {},
): Promise<DoctorReport> {
  const timeoutMs = opts.timeoutMs ?? 5_000;
  const certDays = opts.certDays ?? 14;
  const only = opts.only;
  if (only !== undefined && !CHECK_NAMES.some((c) => selects(only, c))) {
    throw new RangeError(`no check named ${only}: one of ${CHECK_NAMES.join(', ')}`);
  }
  const want = (check: string) => selects(only, check);
  const checks: CheckResult[] = [];
  const { result, cfg } = checkConfig(env);
  if (want('config') || result.status === 'fail') checks.push(result);
  if (!cfg) {
    const skipped =
      only === undefined
        ? [
            'node',
            ...CHECK_NAMES.filter(
              (c) => c !== 'config' && !c.startsWith('node.') && !c.startsWith('testnet.'),
            ),
          ]
        : only === 'config'
          ? []
          : [only];
    for (const check of skipped) {
      checks.push({ check, status: 'skip', detail: 'the configuration is invalid' });
    }
    return { ok: false, checks };
  }
  const needNodes = CHECK_NAMES.some((c) => c.startsWith('node.') && want(c)) || want('clock');
  const needTestnet = CHECK_NAMES.some((c) => c.startsWith('testnet.') && want(c));
  const needState = want('stored_secrets') || want('service.ingest') || want('service.workers');
  // Independent checks run at once; the results keep a fixed order.
  const [database, redis, nodes, testnetNodes, publicUrls, telegram, service] = await Promise.all([
    want('database') ? checkDatabase(cfg, timeoutMs) : undefined,
    want('redis') ? checkRedis(cfg, timeoutMs) : undefined,
    needNodes
      ? Promise.all(cfg.node.providers.map((p, i) => checkProvider(cfg, p, i, timeoutMs)))
      : [],
    needTestnet && cfg.testnetNode
      ? Promise.all(
          cfg.testnetNode.providers.map((p, i) => checkProvider(cfg, p, i, timeoutMs, 'testnet')),
        )
      : [],
    want('public_url') ? checkPublicUrls(cfg, env, timeoutMs, certDays) : [],
    want('telegram') ? checkTelegram(cfg, timeoutMs) : undefined,
    want('service') || want('service.light_client')
      ? checkService(serviceUrl(cfg, opts.serviceUrl), timeoutMs)
      : undefined,
  ]);
  // After the database check: the embedded database takes one opener at a time.
  const state = needState ? await openStoredState(cfg, timeoutMs) : undefined;
  try {
    const findings: NodeFindings[] = nodes.map((n) => n.findings);
    const add = (r: CheckResult | undefined) => {
      if (r && want(r.check)) checks.push(r);
    };
    add(database);
    add(redis);
    for (const n of nodes) for (const r of n.results) add(r);
    add(checkProviderProof(cfg));
    if (!cfg.testnetNode) {
      add({
        check: 'testnet',
        status: 'pass',
        detail:
          'TRON_TESTNET_NODE_URL unset: test mode has only POST /v1/test/transfers deposits (no test network followed)',
      });
    }
    for (const n of testnetNodes) for (const r of n.results) add(r);
    if (want('clock')) add(checkClock(cfg, findings));
    if (want('secret_key')) add(checkSecretKey(cfg));
    if (state && want('stored_secrets')) add(await checkStoredSecrets(cfg, state));
    for (const r of publicUrls) add(r);
    add(telegram);
    add(service?.service);
    add(service?.lightClient);
    if (state && want('service.ingest')) add(await checkIngest(cfg, state, findings));
    if (state && want('service.workers')) add(await checkWorkers(state));
  } finally {
    if (state && 'close' in state) await state.close();
  }
  const ok = checks.every((c) => c.status !== 'fail' && !(opts.strict && c.status === 'warn'));
  return { ok, checks };
}

const LABEL: Record<CheckResult['status'], string> = {
  pass: 'PASS',
  warn: 'WARN',
  fail: 'FAIL',
  skip: 'SKIP',
};

/** The report as text: one line per check, its fix indented below, a summary line. */
export function formatReport(report: DoctorReport, strict = false): string {
  const lines = ['tronwatch doctor'];
  for (const c of report.checks) {
    const what = c.target ? `${c.check} (${c.target})` : c.check;
    lines.push(`  ${LABEL[c.status]}  ${what}: ${c.detail}`);
    if (c.fix && (c.status === 'fail' || c.status === 'warn')) lines.push(`        fix: ${c.fix}`);
  }
  const count = (s: CheckResult['status']) => report.checks.filter((c) => c.status === s).length;
  lines.push(
    report.ok
      ? `OK: ${count('pass')} passed, ${count('warn')} warning(s), ${count('skip')} skipped`
      : `FAILED: ${count('fail')} check(s) failed, ${count('warn')} warning(s)${strict && count('warn') > 0 ? ' (--strict: warnings fail)' : ''}, ${count('pass')} passed`,
  );
  return `${lines.join('\n')}\n`;
}
