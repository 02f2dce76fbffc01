/**
 * The shapes of `tronwatch doctor`'s report (src/doctor/doctor.ts; docs/operating.md "Checking a
 * deployment"): one {@link CheckResult} per check and per thing checked, in the order they ran.
 */

/**
 * - `pass`: as it should be;
 * - `warn`: works, with a remark worth reading (it does not fail the run);
 * - `fail`: the service will not work as it should here: the run exits 1;
 * - `skip`: not configured, or not checkable because an earlier check failed.
 */
export type CheckStatus = 'pass' | 'warn' | 'fail' | 'skip';

/** One check's outcome. Never holds a secret (keys, tokens, passwords). */
export interface CheckResult {
  /**
   * Stable name: `config`, `database`, `redis`, `node.reachable`, `node.mainnet`,
   * `node.solidified_head`, `node.budget`, `node.grpc`, `node.providers`, `testnet` (TRON_TESTNET_NODE_URL unset),
   * `testnet.reachable`, `testnet.network`, `testnet.solidified_head`, `testnet.budget`,
   * `testnet.grpc` (its providers), `clock`, `secret_key`, `stored_secrets`, `public_url`,
   * `telegram`, `service`, `service.light_client`, `service.ingest`, `service.workers`
   * ({@link CHECK_NAMES}).
   */
  check: string;
  /** What it was about, when there can be several: a provider's origin, a URL's origin, a file. */
  target?: string;
  status: CheckStatus;
  /** What was found, one line. */
  detail: string;
  /** What to do about it (fail and warn). */
  fix?: string;
}

/** Every check's name, in the order they are reported (`--check` takes one, or a prefix). */
export const CHECK_NAMES = [
  'config',
  'database',
  'redis',
  'node.reachable',
  'node.mainnet',
  'node.solidified_head',
  'node.budget',
  'node.grpc',
  'node.providers',
  'testnet',
  'testnet.reachable',
  'testnet.network',
  'testnet.solidified_head',
  'testnet.budget',
  'testnet.grpc',
  'clock',
  'secret_key',
  'stored_secrets',
  'public_url',
  'telegram',
  'service',
  'service.light_client',
  'service.ingest',
  'service.workers',
] as const;

/**
 * The whole run. `ok` is false when any check failed, or with `strict` when any warned (the exit
 * code is then 1).
 */
export interface DoctorReport {
  ok: boolean;
  checks: CheckResult[];
}

/** Settings of one run (the command's options). */
export interface DoctorOptions {
  /** Deadline of each network check, ms (a connection, a request). Default 5,000. */
  timeoutMs?: number;
  /** A TLS certificate that expires within this many days fails. Default 14. */
  certDays?: number;
  /**
   * Only this check: a name of {@link CHECK_NAMES}, or a family that is not itself a check
   * (`node` runs every `node.*`; `service` is only `service`). `testnet` is both: the line of an
   * unset TRON_TESTNET_NODE_URL and every `testnet.*`. `config` always runs (everything reads
   * it); it is reported when it is asked for or fails. Default: every check.
   */
  only?: string;
  /** Warnings fail the run too. Default false. */
  strict?: boolean;
  /** The running service's base URL. Default http://HOST:PORT (127.0.0.1 for 0.0.0.0). */
  serviceUrl?: string;
}
