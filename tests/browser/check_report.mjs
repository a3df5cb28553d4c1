// Opens a stallscope HTML report in headless Chromium (the system browser, driven by
// playwright-core) and prints what it finds as one JSON object on stdout:
//
//   node check_report.mjs REPORT.html OUT.png
//
// {"js":{"findings":[titles of the finding list],"sections":N,"timelines":[{finding,lanes,
//   victimWaits,victimWaitPixel:[r,g,b,a],laneCount}],"pageErrors":[],"consoleErrors":[]},
//  "nojs":{"findings":[…],"sections":N,"canvases":0,"noscriptShown":true},
//  "requests":[every URL requested other than the report file itself]}
//
// Every request other than the report file is aborted and listed, so a page that tries to
// reach the network is caught even when the request would have failed anyway. The browser
// is $CHROMIUM or /usr/bin/chromium. The Rust test crates/cli/tests/html_report.rs asserts.
import { chromium } from "playwright-core";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [reportPath, pngPath] = process.argv.slice(2);
if (!reportPath || !pngPath) {
  console.error("usage: node check_report.mjs REPORT.html OUT.png");
  process.exit(2);
}
const url = pathToFileURL(path.resolve(reportPath)).href;
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-default-apps"],
});
const requests = [];

async function open(javaScriptEnabled) {
  const context = await browser.newContext({
    javaScriptEnabled, viewport: { width: 1280, height: 1000 }, deviceScaleFactor: 1,
  });
  await context.route("**/*", (route) => {
    const u = route.request().url();
    if (u === url) return route.continue();
    requests.push(u);
    return route.abort();
  });
  const page = await context.newPage();
  page.on("request", (r) => { if (r.url() !== url && !requests.includes(r.url())) requests.push(r.url()); });
  const pageErrors = [], consoleErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  await page.goto(url, { waitUntil: "load" });
  return { context, page, pageErrors, consoleErrors };
}

const staticPart = (page) => page.evaluate(() => ({
  findings: [...document.querySelectorAll("#finding-list li[data-finding] a")]
    .map((a) => a.querySelector(".sev").textContent + " " + a.querySelector(".det").textContent + ": " +
      a.textContent.replace(a.querySelector(".sev").textContent, "").replace(a.querySelector(".det").textContent, "").trim()),
  titles: [...document.querySelectorAll("section.finding .title")].map((e) => e.textContent),
  sections: document.querySelectorAll("section.finding").length,
  evidenceLines: [...document.querySelectorAll("section.finding pre.evidence")]
    .map((p) => p.textContent.split("\n").filter((l) => l.length > 0).length),
  canvases: document.querySelectorAll("canvas").length,
  visibleTitles: [...document.querySelectorAll("section.finding .title")]
    .filter((e) => e.getBoundingClientRect().height > 0).length,
}));

// with JavaScript
const withJs = await open(true);
await withJs.page.waitForFunction(() => window.__stallscope && window.__stallscope.ready, null, { timeout: 15000 });
const js = await staticPart(withJs.page);
js.timelines = await withJs.page.evaluate(() => window.__stallscope.timelines.map((t) => {
  const el = document.querySelector('.timeline[data-finding="' + t.finding + '"]');
  const canvas = el.querySelector("canvas");
  const g = canvas.getContext("2d");
  const scale = canvas.width / canvas.clientWidth;
  const pixel = (x, y) => Array.from(g.getImageData(Math.round(x * scale), Math.round(y * scale), 1, 1).data);
  // the longest victim wait: share of 21 points along it, on its CPU's wait band, that are red
  const longest = t.victimWaits.slice().sort((a, b) => (b.end_ns - b.start_ns) - (a.end_ns - a.start_ns))[0];
  let victimWaitRedShare = 0, victimWait = null;
  if (longest) {
    let red = 0;
    for (let i = 0; i <= 20; i++) {
      const ts = longest.start_ns + (longest.end_ns - longest.start_ns) * (0.05 + 0.9 * i / 20);
      const p = t.waitPoint(ts, longest.cpu);
      const [r, gg, b, a] = pixel(p.x, p.y);
      if (a > 40 && r > gg + 60 && r > b + 60) red++;
    }
    victimWaitRedShare = red / 21;
    victimWait = longest;
  }
  // lane labels are drawn: a dark pixel somewhere in each lane's label box
  const laneHasLabel = t.lanes.map((cpu) => {
    const y0 = t.waitPoint(0, cpu).y - 6;
    for (let x = 4; x < 74; x++) for (let y = y0 + 10; y < y0 + 26; y++) {
      const [r, gg, b, a] = pixel(x, y);
      if (a > 200 && r < 120 && gg < 120 && b < 120) return true;
    }
    return false;
  });
  // every run slice at least 3 px wide is painted where it should be: the pixel at its
  // middle, in its CPU's run band, is opaque and not the lane's background
  let slicesChecked = 0, slicesPainted = 0;
  for (const s of t.runSlices) {
    const p0 = t.slicePoint(s.start_ns, s.cpu), p1 = t.slicePoint(s.end_ns, s.cpu);
    if (p1.x - p0.x < 3 || p0.x < 80) continue;
    slicesChecked++;
    const [r, gg, b, a] = pixel((p0.x + p1.x) / 2, p0.y);
    if (a > 200 && !(r > 235 && gg > 235 && b > 235)) slicesPainted++;
  }
  return { finding: t.finding, lanes: t.lanes, dataLanes: el.getAttribute("data-lanes"),
           runSlices: t.runSlices, slicesChecked, slicesPainted, tracks: t.tracks,
           victimWaits: t.victimWaits.length, victimWait, victimWaitRedShare, laneHasLabel,
           slices: t.slices, devices: t.devices, requests: t.requests,
           canvasCss: [canvas.clientWidth, canvas.clientHeight] };
}));
// interaction on the first timeline: hover over the victim's longest wait shows its details,
// the wheel zooms in (the view narrows), a drag pans (the view moves earlier), double-click resets
js.interaction = null;
if (js.timelines.length > 0) {
  const page = withJs.page;
  const canvas = page.locator(".timeline canvas").first();
  await canvas.scrollIntoViewIfNeeded();
  const box = await canvas.boundingBox();
  const view = () => page.evaluate(() => window.__stallscope.timelines[0].view());
  let tooltip = null;
  const w = js.timelines[0].victimWait;
  if (w) {
    const p = await page.evaluate(([s, e, c]) => window.__stallscope.timelines[0].waitPoint((s + e) / 2, c),
                                  [w.start_ns, w.end_ns, w.cpu]);
    await page.mouse.move(box.x + p.x, box.y + p.y);
    await page.waitForTimeout(100);
    tooltip = await page.evaluate(() => { const t = document.querySelector(".tl-tip");
      return t && t.style.display === "block" ? t.textContent : null; });
  }
  const v0 = await view();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.wheel(0, -400);
  await page.waitForTimeout(200);
  const v1 = await view();
  await page.mouse.down();
  await page.mouse.move(box.x + box.width / 2 + 200, box.y + box.height / 2, { steps: 5 });
  await page.mouse.up();
  const v2 = await view();
  await canvas.dblclick();
  const v3 = await view();
  js.interaction = { tooltip, spanBefore: v0.t1 - v0.t0, spanZoomed: v1.t1 - v1.t0,
                     panned: v2.t0 < v1.t0, resetSpan: v3.t1 - v3.t0 };
  await page.mouse.move(0, 0);
}
js.pageErrors = withJs.pageErrors;
js.consoleErrors = withJs.consoleErrors;
await withJs.page.evaluate(() => window.scrollTo(0, 0));
await withJs.page.screenshot({ path: pngPath, fullPage: false });
await withJs.context.close();

// without JavaScript
const noJs = await open(false);
const nojs = await staticPart(noJs.page);
nojs.noscriptShown = await noJs.page.evaluate(() =>
  [...document.querySelectorAll(".timeline")].some((e) => e.textContent.includes("needs JavaScript")));
await noJs.context.close();
await browser.close();
console.log(JSON.stringify({ js, nojs, requests }));
