import { execFile } from "node:child_process";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { chromium } from "playwright-core";
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

  const noNpm = async () => ({ error: "not installed" });

  it("takes LEASEHOLD_CHROMIUM when set, else the first usual place that has one, else the npm package's", async () => {
    expect(await findChromium({ LEASEHOLD_CHROMIUM: browser }, [], noNpm)).toEqual({ path: browser, from: "LEASEHOLD_CHROMIUM" });
    expect(await findChromium({}, [join(dir, "absent"), notExecutable, browser], noNpm)).toEqual({ path: browser, from: "system" });
    expect(await findChromium({}, [join(dir, "absent")], async () => ({ path: browser }))).toEqual({ path: browser, from: "npm" });
  });

  it("with no system Chromium, the @sparticuz/chromium dev dependency gives one that runs headless, with nothing downloaded", async () => {
    const found = await findChromium({}, [join(dir, "absent")]);
    expect(found).toMatchObject({ from: "npm" });
    const browserFound = found as { path: string };
    const launched = await chromium.launch({ executablePath: browserFound.path, args: ["--headless", "--no-sandbox", "--disable-gpu"] });
    try {
      const page = await launched.newPage();
      await page.setContent("<p id=p>drawn</p>");
      expect(await page.textContent("#p")).toBe("drawn");
    } finally {
      await launched.close();
    }
  }, 120_000);

  it("says how to install one when LEASEHOLD_CHROMIUM names no executable, without falling back", async () => {
    for (const path of [join(dir, "absent"), notExecutable]) {
      const found = await findChromium({ LEASEHOLD_CHROMIUM: path }, [browser]);
      expect(found).toEqual({ error: expect.stringContaining(`LEASEHOLD_CHROMIUM=${path} is not an executable file`) });
      expect(found).toEqual({ error: expect.stringContaining("apt-get install chromium") });
    }
  });

  it("says where it looked and how to install one when there is none", async () => {
    const found = await findChromium({}, [join(dir, "absent"), notExecutable], noNpm);
    expect(found).toEqual({ error: expect.stringContaining(`looked in ${join(dir, "absent")}, ${notExecutable}; not installed`) });
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
