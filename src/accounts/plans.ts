/**
 * Plans as data (habit 9; SPEC §Limits). Business limits are set per account (accounts
 * .rate_limit_per_min / .watch_quota); the Business row gives the defaults of a new Business account.
 */
export const PLANS = ['free', 'starter', 'pro', 'scale', 'business'] as const;
export type Plan = (typeof PLANS)[number];

export interface PlanLimits {
  /** Requests per sliding 60-second window, per API key. */
  requestsPerMinute: number;
  /** Active watches per network. */
  activeWatches: number;
  /** Display name as SPEC writes it (quota_exceeded `usage.plan`). */
  name: string;
}

export const PLAN_LIMITS: Record<Plan, PlanLimits> = {
  free: { name: 'Free', requestsPerMinute: 60, activeWatches: 3 },
  starter: { name: 'Starter', requestsPerMinute: 120, activeWatches: 20 },
  pro: { name: 'Pro', requestsPerMinute: 300, activeWatches: 100 },
  scale: { name: 'Scale', requestsPerMinute: 1_200, activeWatches: 1_000 },
  // "custom" / "10,000 and more": these defaults apply until the operator sets the account's own.
  business: { name: 'Business', requestsPerMinute: 3_000, activeWatches: 10_000 },
};

/** The limits in force for an account: the plan's, overridden by the account's own (Business). */
export function limitsFor(account: {
  plan: Plan;
  rate_limit_per_min: number | null;
  watch_quota: number | null;
}): PlanLimits {
  const base = PLAN_LIMITS[account.plan];
  return {
    name: base.name,
    requestsPerMinute: account.rate_limit_per_min ?? base.requestsPerMinute,
    activeWatches: account.watch_quota ?? base.activeWatches,
  };
}
