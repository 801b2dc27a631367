import { defineConfig } from "vitest/config";

/**
 * Files whose faults race real leases (2 s, and 1 s) on the machine's real
 * clock: run after the rest of the suite, one at a time, so no other test
 * file's load stretches a Postgres restart or a reconnect past a lease.
 * Beside other files on a 2-core host they ran succeeded jobs again, on the
 * commit before and after alike (the runner's settles could not land in
 * time); alone they keep every count at 0.
 */
const ALONE = ["test/faults.test.ts", "test/lease-faults.test.ts"];

export default defineConfig({
  test: {
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    projects: [
      { extends: true, test: { name: "suite", include: ["test/**/*.test.ts"], exclude: ALONE, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: "alone", include: ALONE, fileParallelism: false, sequence: { groupOrder: 1 } } },
    ],
  },
});
