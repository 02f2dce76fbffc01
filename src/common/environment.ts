/**
 * Environments (issue 32; DESIGN decisions "test mode"): one deployment serves two of them, each
 * with its own keys, watches, endpoints, events, notifications, quotas and audit entries, never
 * mixed.
 *
 *   live  the deployment's network (`mainnet`): real money; keys `tw_live_…`
 *   test  TRON's Nile testnet (`nile`): no money; keys `tw_test_…`; its events come from
 *         deposits triggered through `POST /v1/test/transfers` (src/events/test-transfer.ts)
 *
 * An object's environment is its `network` column (watches, endpoints, events, notifications,
 * api_keys, audit_log): the schema ties an event to a watch, a notification to an event and to a
 * watch (the one whose secret signs it), and a watch to an endpoint of the same network
 * (migrations 090 and 093), so a test event can never be
 * delivered to, or signed with the secret of, a live watch or endpoint.
 */

/** The network of the test environment: TRON's Nile testnet. */
export const TEST_NETWORK = 'nile';
/** The network of the live environment on this deployment (SPEC: mainnet-only deployments). */
export const LIVE_NETWORK = 'mainnet';

/** `live` (real money) or `test`. */
export type Environment = 'live' | 'test';

/** The environment a network belongs to: `mainnet` is live, anything else test. */
export function environmentOf(network: string): Environment {
  return network === LIVE_NETWORK ? 'live' : 'test';
}

/** The network an environment's objects are stored under (`mainnet` or `nile`). */
export function networkOf(environment: Environment): string {
  return environment === 'live' ? LIVE_NETWORK : TEST_NETWORK;
}

/**
 * SPEC §Event `livemode` (additive): true for an event of the live environment, false for a test
 * event. A receiver crediting real deposits refuses any event whose `livemode` is not `true`.
 */
export function isLivemode(network: string): boolean {
  return network === LIVE_NETWORK;
}

/**
 * Header on every webhook delivery of a test event (also the console's and the API's answers
 * made in test mode do not need it: their bodies say `livemode: false`). Value `true`.
 */
export const TEST_MODE_HEADER = 'tronwatch-test-mode';
