/**
 * Test mode's deposits on demand (issue 32 item 3):
 *
 *   POST /v1/test/transfers   (tw_test_ keys only)  → 201 EventWithDelivery
 *
 * A live key gets 403 test_mode_only and nothing is written. Each account may trigger
 * TEST_TRANSFERS_PER_MINUTE of them per minute (a sliding 60 s window shared by the replicas,
 * beside the key's own request rate); more get 429 rate_limited with Retry-After. The console's
 * "Trigger test deposit" button calls {@link testTransferAnswer} too.
 */
import type { FastifyRequest } from 'fastify';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit } from '../../audit/audit.js';
import { isLivemode } from '../../common/environment.js';
import { ApiError } from '../../common/errors.js';
import { EventWithDeliverySchema } from '../../events/event.js';
import {
  type CreateTestTransferBody,
  CreateTestTransferSchema,
  createTestTransfer,
} from '../../events/test-transfer.js';
import { requireAuth } from '../auth.js';
import {
  BEARER_SECURITY,
  commonV1Responses,
  errorResponse,
  preventCoercion,
  RETRY_AFTER_HEADER,
  ref,
  v1Response,
} from '../schemas.js';
import type { App, AppDeps } from '../types.js';

export const testTransferSchemas = [CreateTestTransferSchema];

/**
 * Create a test transfer for the caller in `network` (their environment), after counting it
 * against the account's test-transfer rate; one audit entry `test_transfer.created`.
 * @throws ApiError 403 test_mode_only (live), 429 rate_limited, and createTestTransfer's 400/404/409.
 */
export async function testTransferAnswer(
  deps: Pick<AppDeps, 'db' | 'rateLimiter' | 'config'>,
  request: FastifyRequest,
  accountId: string,
  network: string,
  body: CreateTestTransferBody,
) {
  if (isLivemode(network)) {
    throw ApiError.coded(
      'test_mode_only',
      'test transfers are for test mode only: use a tw_test_ key (or switch the console to test mode)',
    );
  }
  const limit = deps.config.testMode.transfersPerMinute;
  const r = await deps.rateLimiter.hit(`test-transfers:${accountId}`, limit);
  if (!r.allowed) {
    throw new ApiError(
      429,
      `at most ${limit} test transfers per minute: retry in ${r.retryAfterSeconds} s`,
      'rate_limited',
      undefined,
      {},
      { 'Retry-After': String(r.retryAfterSeconds) },
    );
  }
  const audit = auditContextOf(request);
  const event = await createTestTransfer(deps.db, accountId, network, body, (tx, e) =>
    recordAudit(tx, audit, {
      action: 'test_transfer.created',
      targetId: e.event_id,
      detail: {
        watch_id: e.watch_id,
        asset: e.asset,
        amount: e.amount,
        direction: e.direction,
        tx_id: e.tx_id,
      },
    }),
  );
  request.log.info(
    { account_id: accountId, event_id: event.event_id, watch_id: event.watch_id },
    'test transfer created',
  );
  return event;
}

/** Register POST /v1/test/transfers. */
export function testTransferRoutes(app: App, deps: AppDeps): void {
  app.post(
    '/v1/test/transfers',
    {
      schema: {
        operationId: 'createTestTransfer',
        summary: 'Trigger a test deposit (test mode)',
        description:
          'Test keys (`tw_test_…`) only: creates a transfer of the chosen asset, amount, direction and counterparty for a test watch’s address. It becomes a `transfer.confirmed` event with `network: "nile"` and `livemode: false` and a synthetic `tx_id` (`test_…`), delivered through the real pipeline: signed with the watch’s secret, the retry schedule, DEAD, redelivery, Telegram. Its deliveries carry the header `Tronwatch-Test-Mode: true`. A live key gets 403 test_mode_only. At most TEST_TRANSFERS_PER_MINUTE (default 30) per account per minute.',
        tags: ['test mode'],
        security: BEARER_SECURITY,
        body: ref(CreateTestTransferSchema),
        response: {
          ...commonV1Responses(),
          201: v1Response(
            ref(EventWithDeliverySchema),
            'Created: the event, its delivery PENDING.',
          ),
          403: errorResponse(
            'test_mode_only: a live (tw_live_) key; read_only_key: a read-only key; insufficient_role.',
          ),
          404: errorResponse('No such test watch of the caller (missing, deleted, or live).'),
          409: errorResponse('The watch is paused.'),
          413: errorResponse('Body too large.'),
          415: errorResponse('Content-Type is not application/json.'),
          429: errorResponse(
            'rate_limited: requests per minute, or test transfers per minute, exceeded.',
            RETRY_AFTER_HEADER,
          ),
        },
      },
      preValidation: async (request) => {
        preventCoercion(CreateTestTransferSchema, request.body);
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const event = await testTransferAnswer(
        deps,
        request,
        auth.accountId,
        auth.network,
        request.body,
      );
      return reply.code(201).send(event);
    },
  );
}
