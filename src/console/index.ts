/**
 * The console (issue 12; DESIGN "The console and the chat channel"): JSON endpoints under
 * `/console/api/…` and the web app at `/console/`, served by every process that serves `/v1`.
 * It calls the same domain functions as the public API (accounts, keys, watches, events), so a
 * rule lives in one place. Sessions, CSRF and login limits: guard.ts, login-limits.ts.
 */
import cookie from '@fastify/cookie';
import type { App, AppDeps } from '../api/types.js';
import { registerConsoleGuard } from './guard.js';
import { accountRoutes } from './routes/account.js';
import { alertRoutes } from './routes/alerts.js';
import { auditRoutes } from './routes/audit.js';
import { consoleEndpointRoutes } from './routes/endpoints.js';
import { consoleEventRoutes } from './routes/events.js';
import { keyRoutes } from './routes/keys.js';
import { consoleLiveRoutes } from './routes/live.js';
import { memberRoutes } from './routes/members.js';
import { overviewRoutes } from './routes/overview.js';
import { securityRoutes } from './routes/security.js';
import { telegramRoutes } from './routes/telegram.js';
import { consoleWatchRoutes } from './routes/watches.js';
import { registerConsoleApp } from './static.js';

/** Register the console's cookies, guard and routes on the app (before it is ready). */
export async function registerConsole(app: App, deps: AppDeps): Promise<void> {
  await app.register(cookie);
  registerConsoleGuard(app, {
    db: deps.db,
    sessionTtlSeconds: deps.config.console.sessionTtlSeconds,
    network: deps.config.network,
  });
  accountRoutes(app, deps);
  keyRoutes(app, deps);
  memberRoutes(app, deps);
  securityRoutes(app, deps);
  consoleWatchRoutes(app, deps);
  consoleEndpointRoutes(app, deps);
  consoleEventRoutes(app, deps);
  consoleLiveRoutes(app, deps);
  overviewRoutes(app, deps);
  telegramRoutes(app, deps);
  auditRoutes(app, deps);
  alertRoutes(app, deps);
  await registerConsoleApp(app, {});
}
