import { randomUUID } from "node:crypto";
import { chainStep, crashRunner, crunch, flakyWebhook, generateReport, sendWelcomeEmail } from "../jobs/index.ts";

/**
 * Example traffic for `npm run dev`: at start, one of each example (the
 * crashing one ends dead), then a trickle of emails and now and then a chain,
 * a flaky webhook or some CPU work. Each batch goes through the API, so the
 * scheduler is woken as it would be in production.
 */
export function startDemoTraffic(apiUrl: string, token: string): { stop(): void } {
  const post = (jobs: { name: string; payload: unknown; queue?: string }[]) =>
    fetch(`${apiUrl}/v1/jobs/batch`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ jobs }),
    }).catch(() => {});
  void post([
    { name: crashRunner.name, payload: { how: "exit" } },
    { name: generateReport.name, payload: { reportId: "r-1", seconds: 5 } },
    { name: flakyWebhook.name, payload: { url: "https://example.com/hook", failTimes: 2 } },
    { name: chainStep.name, payload: { run: randomUUID().slice(0, 8), step: 1, of: 10 } },
    { name: crunch.name, payload: { ms: 1_000 } },
  ]);
  let tick = 0;
  const timer = setInterval(() => {
    tick++;
    const jobs: { name: string; payload: unknown }[] = Array.from({ length: 1 + (tick % 5) }, (_, i) => ({
      name: sendWelcomeEmail.name, payload: { to: `user${tick}-${i}@example.com`, name: `User ${tick}` },
    }));
    if (tick % 10 === 0) jobs.push({ name: chainStep.name, payload: { run: randomUUID().slice(0, 8), step: 1, of: 5 } });
    if (tick % 15 === 0) jobs.push({ name: flakyWebhook.name, payload: { url: "https://example.com/hook", failTimes: 1 } });
    if (tick % 20 === 0) jobs.push({ name: crunch.name, payload: { ms: 500 } });
    void post(jobs);
  }, 2_000);
  return { stop: () => clearInterval(timer) };
}
