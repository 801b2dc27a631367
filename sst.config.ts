/// <reference path="./.sst/platform/config.d.ts" />

/**
 * The Leasehold app. This file only composes `infra/*`; each infra file
 * declares one group of resources and exports what it creates. Every knob
 * comes from shared/config.ts. See docs/deploy.md.
 */
export default $config({
  app(input) {
    return {
      name: "leasehold",
      removal: input?.stage === "production" ? "retain" : "remove",
      protect: ["production"].includes(input?.stage),
      home: "aws",
      // Cloudflare is used only when config.edge is set (infra/edge.ts).
      providers: { aws: "7.20.0", cloudflare: "6.15.0" },
    };
  },
  async run() {
    await import("./infra/secrets.ts");
    await import("./infra/migrate.ts");
    const { api, rescuer, runners } = await import("./infra/functions.ts");
    await import("./infra/crons.ts");
    const { edge } = await import("./infra/edge.ts");
    const { alarmTopic } = await import("./infra/alarms.ts");
    const { dashboard } = await import("./infra/dashboard.ts");
    return {
      api: api.url,
      rescuerLogGroup: $interpolate`/aws/lambda/${rescuer.name}`,
      // Where "job dead" lines are written: every runner, and the rescuer.
      deathLogGroups: [...Object.values(runners), rescuer].map((fn) => $interpolate`/aws/lambda/${fn.name}`),
      alarmTopic: alarmTopic.arn,
      dashboard: dashboard.dashboardName,
      ...(edge ? { edgeApi: edge.runner.url } : {}),
    };
  },
});
