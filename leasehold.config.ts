import { DEFAULT_QUEUE, defineConfig } from "./shared/index.ts";

/**
 * This repository's own app config, as an app that installed Leasehold
 * writes it (there: `import { defineConfig } from "leasehold"`). The SST
 * component (sst.config.ts), `npm run dev` and the CLI read it.
 */
export default defineConfig({
  jobs: "jobs/index.ts",
  runners: {
    // Isolated jobs and trickles go to a light variant (256 MB, 4 slots): see docs/deploy.md, "Sparse traffic".
    runner: { queues: [DEFAULT_QUEUE], slots: 20, memoryMb: 1024, timeoutSeconds: 300, maxLeaseMs: 60_000, light: { memoryMb: 256, slots: 4 } },
    "runner-cpu": { queues: ["cpu"], slots: 1, memoryMb: 1769, timeoutSeconds: 300, maxLeaseMs: 60_000, maxConcurrency: 4 },
  },
});
