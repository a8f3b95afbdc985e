// Drive the CartPole demo page in headless Chromium with playwright-core (no browser download: it uses the
// system Chromium, /usr/bin/chromium by default). Used by tests/test_export_browser.py.
//
//   node tools/browser_check.js REQUEST.json
//
// REQUEST.json:
//   {"url": "http://127.0.0.1:PORT/index.html?seed=0&episodes=1&speed=max",
//    "observations": [[...4 numbers...], ...],                  // batch to run through the page's policy
//    "physics": {"state": [x, x_dot, theta, theta_dot], "actions": [0, 1, ...]},   // trajectory to simulate
//    "screenshot": "/tmp/.../cartpole.png", "timeout_ms": 60000, "chromium": "/usr/bin/chromium"}
// Prints one JSON object on stdout: {backend, predictions, physics, episode, dom, console_errors, ...}.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

// The flags this machine needs (closed network: no background connections; root: no sandbox).
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                       "--disable-background-networking", "--disable-component-update", "--disable-sync"];

async function main() {
  if (process.argv.length < 3) {
    console.error("usage: node tools/browser_check.js REQUEST.json");
    process.exit(2);
  }
  const request = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const timeout = request.timeout_ms || 60000;
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sbtf-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: request.chromium || "/usr/bin/chromium",
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 760, height: 720 },
  });
  const consoleErrors = [];
  const result = {};
  try {
    const page = context.pages()[0] || (await context.newPage());
    page.on("console", (msg) => { if (msg.type() === "error") consoleErrors.push(msg.text()); });
    page.on("pageerror", (err) => consoleErrors.push(String(err)));
    page.on("requestfailed", (req) => consoleErrors.push("request failed: " + req.url()));
    await page.goto(request.url, { waitUntil: "load", timeout });
    await page.waitForFunction(() => window.sbtfDemo && (window.sbtfDemo.ready || window.sbtfDemo.error),
                               null, { timeout });
    const loadError = await page.evaluate(() => window.sbtfDemo.error);
    if (loadError) throw new Error("the page could not load the policy: " + loadError);
    result.backend = await page.evaluate(() => window.sbtfDemo.backend);
    result.tfjs_version = await page.evaluate(() => tf.version.tfjs);
    result.user_agent = await page.evaluate(() => navigator.userAgent);

    if (request.observations) {
      result.predictions = await page.evaluate(
        async (obs) => window.sbtfDemo.policy.run({ observation: obs }), request.observations);
    }
    if (request.physics) {
      result.physics = await page.evaluate(async ({ state, actions }) => {
        const { CartPole } = await import("./cartpole.js");
        const env = new CartPole(0);
        env.reset(state);
        const states = [];
        const flags = [];
        for (const a of actions) {
          const step = env.step(a);
          states.push(env.state.slice());
          flags.push([step.terminated, step.truncated]);
          if (env.done) break;
        }
        return { states, flags };
      }, request.physics);
    }
    // the page plays its episode(s) by itself; wait for the first one to end
    await page.waitForFunction(() => window.sbtfDemo.episodes.length >= 1, null, { timeout });
    result.episode = await page.evaluate(() => window.sbtfDemo.episodes[0]);
    result.dom = await page.evaluate(() => ({
      steps: document.getElementById("steps").textContent,
      episode: document.getElementById("episode").textContent,
      status: document.getElementById("status").textContent,
      status_class: document.getElementById("status").className,
    }));
    if (request.screenshot) {
      await page.screenshot({ path: request.screenshot });
      result.screenshot = request.screenshot;
    }
  } finally {
    result.console_errors = consoleErrors;
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(result));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
