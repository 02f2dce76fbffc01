/**
 * The console's Alerts page (issue 29 item 1): where an account's watch alerts go. Admins and
 * owners only (the guard's least role: admin).
 *
 *   GET    /console/api/alert-settings              → AlertSettings
 *   PUT    /console/api/alert-settings/channels/{kind} → { channel, secret } (201 when added; `secret`
 *                                                 once, for a new alert webhook) | 400 (URL refused)
 *   DELETE /console/api/alert-settings/channels/{kind} → 204 | 404
 *   POST   /console/api/alert-settings/test            → { ok, error } (a test alert sent now)
 *                                                 | 404 (no such channel) | 503 email_unavailable
 *
 * `kind` is `slack` (a Slack-compatible incoming webhook) or `webhook` (the signed alert
 * webhook). E-mail is not a channel to add: it goes to the members who opted in on the Members
 * page (src/watches/alert-mail.ts); this page lists them and tests it. The rules, the URL policy
 * and the audit entries are the domain's (src/watches/alert-channels.ts); a channel's URL is
 * shown by its host only.
 */
import type { App, AppDeps } from '../../api/types.js';
import { auditContextOf } from '../../audit/actor.js';
import { ApiError } from '../../common/errors.js';
import {
  AlertChannelError,
  type AlertSettings,
  deleteAlertChannel,
  listAlertChannels,
  saveAlertChannel,
  sendTestAlert,
} from '../../watches/alert-channels.js';
import { alertRecipients } from '../../watches/alert-mail.js';
import { requireSession } from '../guard.js';
import { AlertChannelBody, AlertChannelParams, AlertTestBody } from '../schemas.js';

const hide = { hide: true } as const;

function channelError(err: unknown): unknown {
  if (!(err instanceof AlertChannelError)) return err;
  if (err.code === 'not_found') return new ApiError(404, 'alert channel not found');
  if (err.code === 'email_off') return ApiError.coded('email_unavailable', err.message);
  return new ApiError(400, 'invalid request body', undefined, [
    { field: 'url', message: err.message },
  ]);
}

export function alertRoutes(app: App, deps: AppDeps): void {
  app.get(
    '/console/api/alert-settings',
    { config: { consoleRole: 'admin' }, schema: hide },
    async (request): Promise<AlertSettings> => {
      const ctx = requireSession(request);
      return {
        pace_minutes: deps.config.alerts.paceMinutes,
        email: {
          available: deps.mailer !== undefined,
          recipients: await alertRecipients(deps.db, ctx.accountId),
        },
        channels: await listAlertChannels(deps.db, ctx.accountId),
      };
    },
  );

  app.put(
    '/console/api/alert-settings/channels/:kind',
    {
      config: { consoleRole: 'admin' },
      schema: { ...hide, params: AlertChannelParams, body: AlertChannelBody },
    },
    async (request, reply) => {
      const ctx = requireSession(request);
      try {
        const r = await saveAlertChannel(
          deps.db,
          {
            secrets: deps.secrets,
            allowCidrs: deps.config.delivery.allowCidrs,
            resolver: deps.resolver,
          },
          {
            accountId: ctx.accountId,
            kind: request.params.kind,
            url: request.body.url,
            enabled: request.body.enabled,
          },
          auditContextOf(request),
        );
        request.log.info(
          { account_id: ctx.accountId, alert_channel: r.channel.id, created: r.created },
          'alert channel saved',
        );
        return reply.code(r.created ? 201 : 200).send({ channel: r.channel, secret: r.secret });
      } catch (err) {
        throw channelError(err);
      }
    },
  );

  app.delete(
    '/console/api/alert-settings/channels/:kind',
    { config: { consoleRole: 'admin' }, schema: { ...hide, params: AlertChannelParams } },
    async (request, reply) => {
      const ctx = requireSession(request);
      try {
        await deleteAlertChannel(
          deps.db,
          ctx.accountId,
          request.params.kind,
          auditContextOf(request),
        );
      } catch (err) {
        throw channelError(err);
      }
      return reply.code(204).send();
    },
  );

  app.post(
    '/console/api/alert-settings/test',
    { config: { consoleRole: 'admin' }, schema: { ...hide, body: AlertTestBody } },
    async (request) => {
      const ctx = requireSession(request);
      let error: string | null;
      try {
        error = await sendTestAlert(
          deps.db,
          {
            secrets: deps.secrets,
            timeoutMs: deps.config.delivery.timeoutMs,
            allowCidrs: deps.config.delivery.allowCidrs,
            caFile: deps.config.delivery.caFile,
            mailer: deps.mailer,
          },
          ctx.accountId,
          request.body.target,
          auditContextOf(request),
        );
      } catch (err) {
        throw channelError(err);
      }
      return { ok: error === null, error };
    },
  );
}
