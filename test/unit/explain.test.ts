/**
 * The reasons of explainInBlock (src/ingest/explain.ts) that the MCP integration test's real
 * block cannot show (it holds no failed transaction; its watches are active and ingested): a
 * failed USDT call, a paused watch, a block not scanned yet, a block never ingested; and the MCP
 * tool's webhook verification against the published vectors (docs/signature-vectors.json).
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { syntheticBlock } from '../../src/devnet/synthetic.js';
import { explainInBlock } from '../../src/ingest/explain.js';
import { verifyWebhookSignature } from '../../src/mcp/tools.js';

const CHAIN = { seed: 7, firstBlock: 70_000_000, txPerBlock: 200, addresses: 50, failedRate: 0.2 };
const N = 70_000_001;
const b = syntheticBlock(CHAIN, N);

const watch = (address_hex: string, over: Record<string, unknown> = {}) => ({
  id: 'wh_test',
  account_id: 'acc_test',
  address_hex,
  asset_filter: 'ALL' as const,
  direction: 'both' as const,
  channel: 'webhook' as const,
  status: 'ACTIVE' as const,
  active_from_block: N - 10,
  network: 'mainnet',
  ...over,
});

describe('explainInBlock', () => {
  it('says failed for a failed USDT call, naming its result', () => {
    const failed = b.infos.find((i) => i.result === 'FAILED');
    expect(failed).toBeDefined();
    const tx = b.block.transactions?.find((t) => t.txID === failed?.id);
    const sender = String(tx?.raw_data?.contract?.[0]?.parameter?.value?.owner_address);
    const v = explainInBlock(b.block, b.infos, failed?.id as string, watch(sender), N, N);
    expect(v.reason).toBe('failed');
    expect(v.message).toMatch(/REVERT|OUT_OF_ENERGY/);
    expect(v.transfers).toEqual([]);
  });

  it('says watch_paused, not_scanned_yet and not_recorded for a transfer the watch would match', () => {
    const t = b.transfers[0];
    expect(t).toBeDefined();
    const w = watch(t?.to as string);
    const tx = t?.txId as string;
    expect(explainInBlock(b.block, b.infos, tx, { ...w, status: 'PAUSED' }, N, N).reason).toBe(
      'watch_paused',
    );
    expect(explainInBlock(b.block, b.infos, tx, w, N, N - 1).reason).toBe('not_scanned_yet');
    expect(explainInBlock(b.block, b.infos, tx, w, N, null).reason).toBe('not_scanned_yet');
    expect(explainInBlock(b.block, b.infos, tx, w, N, N).reason).toBe('not_recorded');
    expect(explainInBlock(b.block, b.infos, tx, { ...w, active_from_block: N }, N, N).reason).toBe(
      'before_activation',
    );
  });
});

describe('verify_webhook_signature (the MCP tool’s check)', () => {
  const vectors = JSON.parse(
    fs.readFileSync(path.resolve(import.meta.dirname, '../../docs/signature-vectors.json'), 'utf8'),
  ) as {
    vectors: Array<{
      secret: string;
      webhook_id: string;
      webhook_timestamp: number;
      body: string;
      x_signature: string;
      webhook_signature: string;
    }>;
  };

  it('accepts every published vector in both schemes, and refuses stale or altered ones', () => {
    for (const v of vectors.vectors) {
      const headers = {
        'X-Signature': v.x_signature,
        'Webhook-Id': v.webhook_id,
        'Webhook-Timestamp': String(v.webhook_timestamp),
        'Webhook-Signature': v.webhook_signature,
      };
      expect(verifyWebhookSignature(v.body, headers, v.secret, v.webhook_timestamp + 10)).toEqual({
        valid: true,
        x_signature: 'valid',
        standard_webhooks: 'valid',
      });
      expect(verifyWebhookSignature(v.body, headers, v.secret, v.webhook_timestamp + 3600)).toEqual(
        { valid: false, x_signature: 'valid', standard_webhooks: 'timestamp_too_old' },
      );
      expect(
        verifyWebhookSignature(`${v.body} `, headers, v.secret, v.webhook_timestamp),
      ).toMatchObject({ valid: false, x_signature: 'invalid', standard_webhooks: 'bad_signature' });
      expect(verifyWebhookSignature(v.body, {}, v.secret, v.webhook_timestamp)).toEqual({
        valid: false,
        x_signature: 'absent',
        standard_webhooks: 'absent',
      });
    }
  });
});
