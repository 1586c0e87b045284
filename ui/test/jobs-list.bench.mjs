// A benchmark, not an assertion: the jobs list's first view with 10 000 registered jobs, from
// navigation start to the first page's rows on screen, in the headless chromium against a real
// agent. Prints the median of a few loads; BENCHMARKS.md records the figure and this command:
//   cd ui && npm run bench      (node --test test/jobs-list.bench.mjs; DROVER_UI_BENCH_JOBS=N to change N)
// DROVER_UI_BENCH_ADDRESS=http://127.0.0.1:4646 measures an agent that already holds its jobs
// instead (nothing is registered). Also printed: the register rate, and the agent's answer
// time to the list page the UI asks for.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launchBrowser, missingBrowser, startAgent } from './harness.mjs';
import { PAGE_SIZE_FOR_TESTS } from './constants.mjs';

const JOBS = Number(process.env.DROVER_UI_BENCH_JOBS ?? 10000);

// Parameterized batch jobs: registered and listed like any job, never placed, so 10 000 of them
// load the job tables without 10 000 allocations.
const jobJson = (id) => ({
  ID: id, Name: id, Type: 'batch', Datacenters: ['*'],
  ParameterizedJob: { Payload: 'optional' },
  TaskGroups: [{ Name: 'g', Count: 1, Tasks: [{ Name: 't', Driver: 'raw_exec', Config: { command: '/bin/true' }, Resources: { CPU: 10, MemoryMB: 16 } }] }],
});

// Where a load's time went, from the browser's own timings (ms since navigation start): the
// document, each script, style and API read (start → end), and when the script ran.
function breakdown() {
  const [nav] = performance.getEntriesByType('navigation');
  const ms = (n) => n.toFixed(0);
  const parts = [`document ${ms(nav.requestStart)}→${ms(nav.responseEnd)}`,
    `domInteractive ${ms(nav.domInteractive)}`, `DOMContentLoaded ${ms(nav.domContentLoadedEventEnd)}`];
  for (const r of performance.getEntriesByType('resource')) {
    const name = new URL(r.name).pathname.replace(/^.*\/(assets|v1)\//, '$1/') + new URL(r.name).search;
    parts.push(`${name} ${ms(r.startTime)}→${ms(r.responseEnd)} (${r.encodedBodySize} B)`);
  }
  return parts.join('; ');
}

test(`the jobs list's first view with ${JOBS} jobs`, async (t) => {
  if (missingBrowser(t)) return;
  let address = process.env.DROVER_UI_BENCH_ADDRESS;
  let registering = 'not registered here';
  if (!address) {
    const agent = await startAgent();
    t.after(() => agent.stop());
    address = agent.address;
    const started = Date.now();
    let next = 0;
    let done = 0;
    let mark = started;
    const perThousand = [];
    const worker = async () => {
      while (next < JOBS) {
        const id = `bench-${String(next++).padStart(5, '0')}`;
        await agent.api('POST', '/v1/jobs', { Job: jobJson(id) });
        if (++done % 1000 === 0) {
          // How a register's cost moves with the number of jobs already stored.
          perThousand.push(`${done - 1000}: ${((Date.now() - mark) / 1000).toFixed(1)} ms`);
          mark = Date.now();
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    registering = `registered in ${((Date.now() - started) / 1000).toFixed(1)} s; ms per register by jobs stored: ${perThousand.join(', ')}`;
  }
  const jobs = (await (await fetch(`${address}/v1/jobs`)).json()).length;
  // The agent's answer to the list page the UI asks for first, alone (median of 10).
  const listUrl = `${address}/v1/jobs?meta=true&namespace=*&per_page=${PAGE_SIZE_FOR_TESTS}`;
  const answers = [];
  for (let i = 0; i < 10; i++) {
    const asked = performance.now();
    await (await fetch(listUrl)).text();
    answers.push(performance.now() - asked);
  }
  answers.sort((a, b) => a - b);
  const browser = await launchBrowser();
  t.after(() => browser.close());
  const page = await browser.newPage();
  const times = [];
  let coldBreakdown = '';
  for (let i = 0; i < 6; i++) {
    await page.goto(address + '/ui/jobs', { waitUntil: 'domcontentloaded' });
    const ms = await page.waitForFunction((n) => {
      const rows = document.querySelectorAll('#jobs-table tbody tr').length;
      return rows === n ? performance.now() : false;
    }, { polling: 'raf', timeout: 60000 }, PAGE_SIZE_FOR_TESTS);
    times.push(await ms.jsonValue());
    if (i === 0) coldBreakdown = await page.evaluate(breakdown);
  }
  // The first load fills the browser's cache (the assets are immutable); the rest are what a
  // returning user sees. Both are reported.
  const cold = times[0];
  const warm = times.slice(1).sort((a, b) => a - b)[Math.floor((times.length - 1) / 2)];
  console.log(`cold first view, where the time goes (ms from navigation start): ${coldBreakdown}`);
  console.log(`jobs list first view, ${jobs} jobs: cold ${cold.toFixed(0)} ms, warm median ${warm.toFixed(0)} ms; `
    + `GET /v1/jobs page of ${PAGE_SIZE_FOR_TESTS}: median ${answers[5].toFixed(1)} ms (${registering})`);
  assert.equal(await page.$$eval('#jobs-table tbody tr', (rows) => rows.length), PAGE_SIZE_FOR_TESTS);
});
