// Screenshots of the main pages for the README (docs/ui/*.png), from a real dev agent running
// examples/web.hcl:   cd ui && node test/screenshots.mjs
import { readFileSync, mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { launchBrowser, startAgent, waitFor } from './harness.mjs';

const root = resolve(import.meta.dirname, '..', '..');
const out = resolve(root, 'docs', 'ui');
mkdirSync(out, { recursive: true });
const agent = await startAgent();
try {
  await agent.runHcl(readFileSync(resolve(root, 'examples', 'web.hcl'), 'utf8'));
  const allocs = await waitFor('running allocations', async () => {
    const list = await agent.api('GET', '/v1/job/web/allocations');
    return list.filter((a) => a.ClientStatus === 'running').length === 2 && list;
  });
  const browser = await launchBrowser();
  const page = await browser.newPage();
  const shot = async (path, name, ready, scheme = 'light') => {
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: scheme }]);
    await page.goto(agent.address + path);
    await page.waitForSelector(ready);
    await new Promise((r) => setTimeout(r, 1200));
    await page.screenshot({ path: resolve(out, name) });
  };
  const alloc = allocs[0].ID;
  await shot('/ui/jobs', 'jobs.png', '#jobs-table');
  await shot('/ui/jobs/web', 'job.png', 'table.allocs');
  // The example's server logs its requests (the health checks) on stderr.
  await page.goto(`${agent.address}/ui/allocations/${alloc}?tab=logs`);
  await page.waitForSelector('#stderr');
  await page.click('#stderr');
  await page.waitForFunction(() => (document.querySelector('#log-output')?.textContent ?? '').includes('GET /'), { timeout: 30000 });
  await page.screenshot({ path: resolve(out, 'logs.png') });
  await page.goto(`${agent.address}/ui/allocations/${alloc}?tab=exec`);
  await page.waitForSelector('#exec-open:not([disabled])');
  await page.click('#exec-open');
  await page.waitForFunction(() => document.querySelector('#exec-status')?.textContent === 'connected');
  await page.waitForFunction(() => (document.querySelector('.xterm-rows')?.textContent ?? '').includes('#'));
  await page.keyboard.type('ls -la $NOMAD_TASK_DIR; echo hi\n');
  await new Promise((r) => setTimeout(r, 1500));
  await page.screenshot({ path: resolve(out, 'exec.png') });
  await shot('/ui/topology', 'topology.png', '.topo-node', 'dark');
  await browser.close();
} finally {
  await agent.stop();
}
console.log(`screenshots in ${out}`);
