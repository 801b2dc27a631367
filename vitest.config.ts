import { defineConfig } from "vitest/config";

/**
 * Files whose faults race real leases (2 s, and 1 s) on the machine's real
 * clock: run first, one at a time, on a fresh database and a machine no
 * other test file has loaded yet, so nothing else adds to the restarts,
 * cuts and stalls they time against a lease (run after the suite, on the
 * database and machine it leaves, the cut test failed every try). What they
 * assert does not change; what they measure is the runner's, not the
 * neighbours'.
 */
const ALONE = ["test/faults.test.ts", "test/lease-faults.test.ts"];

export default defineConfig({
  test: {
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    projects: [
      { extends: true, test: { name: "suite", include: ["test/**/*.test.ts"], exclude: ALONE, sequence: { groupOrder: 2 } } },
      { extends: true, test: { name: "alone", include: ALONE, fileParallelism: false, sequence: { groupOrder: 1 } } },
    ],
  },
});
