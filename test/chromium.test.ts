import { execFile } from "node:child_process";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { findChromium } from "./support/chromium.ts";

/** Without a browser, the browser test fails in one clear line; nothing else does, and nothing is skipped. */
describe("finding Chromium for the browser test", () => {
  let dir: string;
  let browser: string;
  let notExecutable: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "leasehold-chromium-"));
    browser = join(dir, "chromium");
    notExecutable = join(dir, "chromium.txt");
    await writeFile(browser, "#!/bin/sh\n");
    await chmod(browser, 0o755);
    await writeFile(notExecutable, "");
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("takes LEASEHOLD_CHROMIUM when set, else the first usual place that has one", () => {
    expect(findChromium({ LEASEHOLD_CHROMIUM: browser }, [])).toEqual({ path: browser });
    expect(findChromium({}, [join(dir, "absent"), notExecutable, browser])).toEqual({ path: browser });
  });

  it("says how to install one when LEASEHOLD_CHROMIUM names no executable, without falling back", () => {
    for (const path of [join(dir, "absent"), notExecutable]) {
      const found = findChromium({ LEASEHOLD_CHROMIUM: path }, [browser]);
      expect(found).toEqual({ error: expect.stringContaining(`LEASEHOLD_CHROMIUM=${path} is not an executable file`) });
      expect(found).toEqual({ error: expect.stringContaining("apt-get install chromium") });
    }
  });

  it("says where it looked and how to install one when there is none", () => {
    const found = findChromium({}, [join(dir, "absent"), notExecutable]);
    expect(found).toEqual({ error: expect.stringContaining(`looked in ${join(dir, "absent")}, ${notExecutable}`) });
    expect(found).toEqual({ error: expect.stringMatching(/apt-get install chromium.*LEASEHOLD_CHROMIUM/) });
  });

  it("test/browser.test.ts without a browser: one failed test with that message, none passed or skipped", async () => {
    const report = join(dir, "report.json");
    const run = await promisify(execFile)(process.execPath, [
      "node_modules/vitest/vitest.mjs", "run", "test/browser.test.ts", "--reporter=json", `--outputFile.json=${report}`,
    ], { env: { ...process.env, LEASEHOLD_CHROMIUM: join(dir, "absent"), DATABASE_URL: inject("databaseUrl") } })
      .then(() => ({ code: 0 }), (err: { code: number }) => ({ code: err.code }));
    expect(run.code).toBe(1);
    const r = JSON.parse(await readFile(report, "utf8"));
    expect({ failed: r.numFailedTests, passed: r.numPassedTests, skipped: r.numPendingTests + r.numTodoTests }).toEqual({ failed: 1, passed: 0, skipped: 0 });
    const messages: string[] = r.testResults.flatMap((f: { assertionResults: { failureMessages: string[] }[] }) => f.assertionResults.flatMap((a) => a.failureMessages));
    expect(messages.join("\n")).toContain(`LEASEHOLD_CHROMIUM=${join(dir, "absent")} is not an executable file; install it (Debian or Ubuntu: apt-get install chromium)`);
  });
});
