/// <reference path="./.sst/platform/config.d.ts" />

/**
 * This repository's own app, deployed exactly as an app that installed
 * Leasehold deploys it: the `Leasehold` component (there: `leasehold/sst`)
 * from the app's config (leasehold.config.ts) and its recurring jobs
 * (jobs/index.ts). See docs/deploy.md.
 */
export default $config({
  app(input) {
    return {
      name: "leasehold",
      removal: input?.stage === "production" ? "retain" : "remove",
      protect: ["production"].includes(input?.stage),
      home: "aws",
      // Cloudflare is used only when config.edge is set.
      providers: { aws: "7.20.0", cloudflare: "6.15.0" },
    };
  },
  async run() {
    const { Leasehold } = await import("./infra/component.ts");
    const { default: config } = await import("./leasehold.config.ts");
    const { recurring } = await import("./jobs/index.ts");
    const leasehold = new Leasehold("Leasehold", { config, recurring });
    return {
      api: leasehold.api.url,
      rescuerLogGroup: leasehold.rescuerLogGroup,
      deathLogGroups: leasehold.deathLogGroups,
      alarmTopic: leasehold.alarmTopic.arn,
      dashboard: leasehold.dashboard.dashboardName,
      ...(leasehold.edge ? { edgeApi: leasehold.edge.runner.url } : {}),
    };
  },
});
