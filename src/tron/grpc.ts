/**
 * java-tron's gRPC API, for the one call the HTTP API cannot replace: a solidified block as its
 * exact protobuf bytes (`protocol.WalletSolidity/GetBlockByNum2`, api.proto: NumberMessage
 * {int64 num = 1} → BlockExtention; with the light client on, the full node's
 * `protocol.Wallet/GetBlockByNum2`, the same call for blocks not solidified yet), so that tron/verify.ts can check the header's txTrieRoot
 * over each transaction's whole bytes (the HTTP JSON may not show every field of `ret`).
 * Public providers serve it beside the HTTP API (TronGrid: grpc.trongrid.io, the API key as the
 * `TRON-PRO-API-KEY` metadata); a java-tron node serves it on its solidity gRPC port (50061 by
 * default).
 *
 * Transport: @grpc/grpc-js with a generic unary call (no generated stubs, no .proto loading):
 * the request is encoded by hand (one varint field) and the answer is kept as bytes.
 * Errors: a NodeError whose `retryable` follows the gRPC status (UNAVAILABLE, DEADLINE_EXCEEDED,
 * RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNKNOWN: retryable; the rest: not).
 */
import { Client, credentials, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { NodeError } from './node-error.js';
import { PbWriter } from './protobuf.js';

/** Full method name of GetBlockByNum2 on the solidity service. */
export const GET_BLOCK_BY_NUM2 = '/protocol.WalletSolidity/GetBlockByNum2';
/**
 * Full method name of GetBlockByNum2 on the full node's service (`protocol.Wallet`, api.proto):
 * the same BlockExtention for any block up to the node's head, solidified or not (read with the
 * light client on, which proves finality itself: ingest/finality-gate.ts).
 */
export const GET_FULL_BLOCK_BY_NUM2 = '/protocol.Wallet/GetBlockByNum2';

const RETRYABLE = new Set<number>([
  status.UNAVAILABLE,
  status.DEADLINE_EXCEEDED,
  status.RESOURCE_EXHAUSTED,
  status.ABORTED,
  status.INTERNAL,
  status.UNKNOWN,
]);

/** Where a provider serves gRPC: `grpc://host:port` (plaintext) or `grpcs://host:port` (TLS). */
export interface GrpcTarget {
  host: string;
  port: number;
  tls: boolean;
}

/**
 * Parse `grpc://host:port` or `grpcs://host:port`.
 * @throws TypeError on anything else.
 */
export function parseGrpcTarget(s: string): GrpcTarget {
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw new TypeError(`not a grpc:// or grpcs:// address: ${s}`);
  }
  if ((u.protocol !== 'grpc:' && u.protocol !== 'grpcs:') || !u.hostname || !u.port) {
    throw new TypeError(`expected grpc://host:port or grpcs://host:port, got ${s}`);
  }
  if (u.pathname !== '' && u.pathname !== '/') throw new TypeError(`no path allowed in ${s}`);
  return { host: u.hostname, port: Number(u.port), tls: u.protocol === 'grpcs:' };
}

/** A gRPC connection to one provider's solidity service. */
export class GrpcBlockClient {
  private readonly client: Client;
  private readonly metadata: Metadata;
  readonly target: string;

  /**
   * @param apiKey sent as `TRON-PRO-API-KEY` metadata when set (TronGrid).
   */
  constructor(target: GrpcTarget, apiKey: string | undefined) {
    const host = target.host.includes(':') ? `[${target.host}]` : target.host;
    this.target = `${host}:${target.port}`;
    this.client = new Client(
      this.target,
      target.tls ? credentials.createSsl() : credentials.createInsecure(),
      // Blocks are up to a few MB; java-tron's own limit is 4 MB by default, raised by providers.
      { 'grpc.max_receive_message_length': 64 * 1024 * 1024 },
    );
    this.metadata = new Metadata();
    if (apiKey) this.metadata.set('TRON-PRO-API-KEY', apiKey);
  }

  /**
   * The `BlockExtention` bytes of block `n` (empty when the node does not have it): solidified
   * (`method` GET_BLOCK_BY_NUM2, the default) or as the full node has it (GET_FULL_BLOCK_BY_NUM2).
   * @throws NodeError (kind network/timeout/rate_limited/http, retryable by gRPC status).
   */
  getBlockByNum2(
    n: number,
    timeoutMs: number,
    signal?: AbortSignal,
    method: string = GET_BLOCK_BY_NUM2,
  ): Promise<Buffer> {
    const request = Buffer.from(new PbWriter().varint(1, n).finish());
    return new Promise<Buffer>((resolve, reject) => {
      const call = this.client.makeUnaryRequest<Buffer, Buffer>(
        method,
        (b: Buffer) => b,
        (b: Buffer) => b,
        request,
        this.metadata,
        { deadline: Date.now() + timeoutMs },
        (err: ServiceError | null, value?: Buffer) => {
          signal?.removeEventListener('abort', onAbort);
          if (err) {
            if (signal?.aborted) return reject(signal.reason);
            const kind =
              err.code === status.DEADLINE_EXCEEDED
                ? 'timeout'
                : err.code === status.RESOURCE_EXHAUSTED
                  ? 'rate_limited'
                  : err.code === status.UNAVAILABLE
                    ? 'network'
                    : 'http';
            // A solidity port asked for the full node's service (light client on): say where.
            const hint =
              err.code === status.UNIMPLEMENTED && method === GET_FULL_BLOCK_BY_NUM2
                ? ` (${this.target} does not serve the full node's protocol.Wallet, which the light client reads above the solidified head: give the full node's gRPC port with #grpc_full=grpc://host:port, 50051 on java-tron)`
                : '';
            return reject(
              new NodeError(
                kind,
                `gRPC ${method.slice(1)} ${n}: ${status[err.code] ?? err.code} ${err.details}${hint}`,
                RETRYABLE.has(err.code),
              ),
            );
          }
          resolve(value ?? Buffer.alloc(0));
        },
      );
      const onAbort = () => call.cancel();
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  close(): void {
    this.client.close();
  }
}
