/**
 * Whether the configured providers can prove what ingest commits (issue 26, "a configuration that
 * cannot prove anything is refused at start"). A block's transaction list is proven against its
 * header from exact bytes (a provider with gRPC, tron/exact-block.ts), or, JSON only, by k ≥ 2
 * providers agreeing; a single provider without gRPC can do neither for a block whose JSON hides
 * bytes (mainnet block 79,072,107 is one), which then stalls (tron/node-group.ts, `tx_root`). The
 * ingest role refuses to start with such a configuration, unless the operator opts out for
 * development (TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER=1), which is logged as a warning at every start;
 * `tronwatch doctor` reports it (src/doctor/node.ts).
 */
import type { Logger } from '../common/logger.js';
import type { ProviderSettings } from '../config.js';

/** The configuration cannot prove blocks and no opt-out is set: the ingest role does not start. */
export class UnprovableNodeConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnprovableNodeConfigError';
  }
}

/**
 * Why the providers cannot prove every block, or undefined when they can: exactly one provider
 * in TRON_NODE_URL and no gRPC address for it (quorum is then 1).
 * @returns a message naming what to add (gRPC, or a second provider at quorum 2) and the opt-out.
 */
export function unprovableReason(node: {
  providers: readonly Pick<ProviderSettings, 'name' | 'grpc'>[];
}): string | undefined {
  const only = node.providers[0];
  if (node.providers.length !== 1 || !only || only.grpc) return undefined;
  return (
    `TRON_NODE_URL has one provider (${only.name}) and no gRPC for it: one provider's JSON cannot prove ` +
    'a block whose JSON hides bytes, so nothing it says about money is proven. Add its gRPC address ' +
    '(TRON_NODE_URL=<url>#grpc=grpc://host:port; a java-tron node serves it on its solidity gRPC port, ' +
    'TronGrid gets grpc.trongrid.io:50052 by default), or a second provider with TRON_NODE_QUORUM=2 ' +
    '(TRON_NODE_URL=<url1>,<url2>). For development only, TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER=1 ' +
    'starts anyway.'
  );
}

/**
 * The start-up check of the ingest role: throws when the providers cannot prove blocks (see
 * unprovableReason), logs a warning when the operator opted out.
 * @throws UnprovableNodeConfigError with the message of unprovableReason.
 */
export function assertProvable(
  node: { providers: readonly Pick<ProviderSettings, 'name' | 'grpc'>[] } & {
    allowUnprovenSingleProvider: boolean;
  },
  logger: Logger,
): void {
  const why = unprovableReason(node);
  if (!why) return;
  if (!node.allowUnprovenSingleProvider) throw new UnprovableNodeConfigError(why);
  logger.warn(
    { provider: node.providers[0]?.name },
    'TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER=1: ingesting from ONE provider WITHOUT gRPC (development only). Blocks whose JSON hides bytes cannot be proven and will stall; never run money on this: add #grpc= or a second provider with TRON_NODE_QUORUM=2',
  );
}
