import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Each file gets its own process: servers, pools and embedded databases never leak across files.
    // Three at once on a 2-core machine: most files spend over half their time waiting (retry
    // schedules, leases, child processes), so a third fork fills the idle CPU. Measured on the
    // whole suite: 44 min with 2 forks (CI at 2226314); with 3, 17 min on a quiet machine and
    // 30-33 min with other work loading it.
    pool: 'forks',
    poolOptions: { forks: { maxForks: 3, minForks: 1 } },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
