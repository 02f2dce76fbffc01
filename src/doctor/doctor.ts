/**
 * `tronwatch doctor` (issue 20 item 5; docs/operating.md "Checking a deployment"): checks a deployment's
 * configuration and everything it depends on, and says for each problem what to do.
 *
 * Checks, in order (types.ts names them): `config` (the environment parses: src/config.ts, and
 * the files it names exist), then, with a valid configuration, `database`, `redis`, every
 * provider of TRON_NODE_URL (`node.*`), `clock`, `secret_key`, `public_url`, `telegram`
 * (checks.ts, node.ts: each documents its rule). Nothing is written, nothing secret is printed.
 * The run is OK, and the command exits 0, when no check failed (`warn` and `skip` do not fail).
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
import { checkClock, checkProvider, type NodeFindings } from './node.js';
import type { CheckResult, DoctorOptions, DoctorReport } from './types.js';

export type { CheckResult, CheckStatus, DoctorOptions, DoctorReport } from './types.js';

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

/**
 * Run every check against the configuration `env` describes.
 * @param env a process.env-like record (the command passes process.env).
 * @returns the report; never throws for a failed check (each is a result).
 */
export async function runDoctor(
  env: Record<string, string | undefined>,
  opts: DoctorOptions = {},
): Promise<DoctorReport> {
  const timeoutMs = opts.timeoutMs ?? 5_000;
  const certDays = opts.certDays ?? 14;
  const checks: CheckResult[] = [];
  const { result, cfg } = checkConfig(env);
  checks.push(result);
  if (!cfg) {
    for (const check of [
      'database',
      'redis',
      'node',
      'clock',
      'secret_key',
      'public_url',
      'telegram',
    ]) {
      checks.push({ check, status: 'skip', detail: 'the configuration is invalid' });
    }
    return { ok: false, checks };
  }
  // Independent checks run at once; the results keep a fixed order.
  const [database, redis, nodes, publicUrls, telegram] = await Promise.all([
    checkDatabase(cfg, timeoutMs),
    checkRedis(cfg, timeoutMs),
    Promise.all(cfg.node.providers.map((p, i) => checkProvider(cfg, p, i, timeoutMs))),
    checkPublicUrls(cfg, env, timeoutMs, certDays),
    checkTelegram(cfg, timeoutMs),
  ]);
  checks.push(database, redis);
  for (const n of nodes) checks.push(...n.results);
  const findings: NodeFindings[] = nodes.map((n) => n.findings);
  checks.push(checkClock(cfg, findings), checkSecretKey(cfg), ...publicUrls, telegram);
  return { ok: checks.every((c) => c.status !== 'fail'), checks };
}

const LABEL: Record<CheckResult['status'], string> = {
  pass: 'PASS',
  warn: 'WARN',
  fail: 'FAIL',
  skip: 'SKIP',
};

/** The report as text: one line per check, its fix indented below, a summary line. */
export function formatReport(report: DoctorReport): string {
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
      : `FAILED: ${count('fail')} check(s) failed, ${count('warn')} warning(s), ${count('pass')} passed`,
  );
  return `${lines.join('\n')}\n`;
}
