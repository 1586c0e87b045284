// Every action the UI offers, driven in the browser against a real agent, its effect checked
// through the API: signal a task, download its log, browse its files; drain a client and
// edit its metadata; a job's `ui` block, its JSON definition, start and purge.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clickText, launchBrowser, missingBrowser, newPage, setValue, startAgent, textOf, waitFor } from './harness.mjs';

// Says it is ready, writes a file into its task dir, and answers SIGUSR1 on stdout; then
// prints nothing more, so its log is the same whenever it is read.
const SIGNALED = `job "signaled" {
  type = "service"

  group "app" {
    task "waiter" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo got-usr1' USR1; printf 'note for the file browser\\\\nsecond line\\\\n' > \\"$NOMAD_TASK_DIR/note.txt\\"; echo ready; while true; do sleep 1; done"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`;

test('allocation actions: signal a task, download its log, browse its files', async (t) => {
  if (missingBrowser(t)) return;
  const agent = await startAgent();
  t.after(() => agent.stop());
  await agent.runHcl(SIGNALED);
  const alloc = await waitFor('a running allocation', async () => {
    const allocs = await agent.api('GET', '/v1/job/signaled/allocations');
    return allocs.find((a) => a.ClientStatus === 'running');
  });
  const logOf = async () => {
    const response = await fetch(`${agent.address}/v1/client/fs/logs/${alloc.ID}?task=waiter&type=stdout&origin=start&offset=0&plain=true`);
    return response.text();
  };
  await waitFor('the task to be ready', async () => (await logOf()).includes('ready'));
  const browser = await launchBrowser();
  t.after(() => browser.close());
  const page = await newPage(browser, t);

  // Signal: SIGUSR1 picked and confirmed; the task's trap answers on stdout and the task
  // records a Signaling event.
  await page.goto(`${agent.address}/ui/allocations/${alloc.ID}`);
  await page.waitForSelector('select[aria-label="signal"]');
  await page.select('select[aria-label="signal"]', 'SIGUSR1');
  await clickText(page, '.page-head .actions button', 'Signal');
  await clickText(page, '.page-head .actions button', 'Send SIGUSR1?');
  await waitFor('the task to get SIGUSR1', async () => (await logOf()).includes('got-usr1'));
  await waitFor('a Signaling event', async () =>
    (await agent.api('GET', `/v1/allocation/${alloc.ID}`)).TaskStates.waiter.Events.some((e) => e.Type === 'Signaling'));
  await page.waitForFunction(() => document.querySelector('table.events')?.innerText.includes('Signaling'), { polling: 100 });

  // Download: the browser saves the whole stdout log, byte for byte what the API serves.
  const downloads = mkdtempSync(join(tmpdir(), 'drover-ui-downloads-'));
  t.after(() => rmSync(downloads, { recursive: true, force: true }));
  const cdp = await browser.target().createCDPSession();
  await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads });
  await clickText(page, '.tabs a', 'Logs');
  await page.waitForFunction(() => (document.querySelector('#log-output')?.textContent ?? '').includes('got-usr1'), { polling: 100 });
  await page.click('#download-log');
  const name = `${alloc.ID.slice(0, 8)}-waiter.stdout.log`;
  await waitFor('the downloaded log', async () => readdirSync(downloads).includes(name), 20000);
  assert.equal(readFileSync(join(downloads, name), 'utf8'), await logOf());

  // Files: from the allocation's root down to the task's note, shown as the file holds it.
  await clickText(page, '.tabs a', 'Files');
  await page.waitForSelector('#files');
  await clickText(page, '#files a', 'waiter/');
  await clickText(page, '#files a', 'local/');
  await clickText(page, '#files a', 'note.txt');
  await page.waitForSelector('pre.code');
  const cat = await fetch(`${agent.address}/v1/client/fs/cat/${alloc.ID}?path=waiter/local/note.txt`);
  assert.equal(cat.status, 200);
  const file = await cat.text();
  assert.equal(file, 'note for the file browser\nsecond line\n');
  assert.equal(await textOf(page, 'pre.code'), file);
  assert.match(await textOf(page, 'nav.crumbs'), /alloc \/ waiter \/ local \/ note\.txt/);
});

test('client actions: drain with a deadline and stop it, set and remove node metadata', async (t) => {
  if (missingBrowser(t)) return;
  const agent = await startAgent();
  t.after(() => agent.stop());
  // Two allocations of one group on the only client: with migrate's max_parallel of 1 the
  // drain stops one and waits for its replacement, which has nowhere to go, so the drain
  // stays in force until it is stopped.
  await agent.runHcl(SIGNALED.replace('group "app" {', 'group "app" {\n    count = 2\n'));
  await waitFor('two running allocations', async () =>
    (await agent.api('GET', '/v1/job/signaled/allocations')).filter((a) => a.ClientStatus === 'running').length === 2);
  const [node] = await agent.api('GET', '/v1/nodes');
  const browser = await launchBrowser();
  t.after(() => browser.close());
  const page = await newPage(browser, t);
  await page.goto(`${agent.address}/ui/clients/${node.ID}`);

  // Drain with a 30m deadline: the node's drain strategy carries it, and it is ineligible.
  await page.waitForSelector('#drain');
  await setValue(page, 'input[aria-label="drain deadline"]', '30m');
  await page.click('#drain');
  await page.click('#drain'); // confirm
  const drained = await waitFor('the drain', async () => {
    const n = await agent.api('GET', `/v1/node/${node.ID}`);
    return n.DrainStrategy ? n : null;
  });
  assert.equal(drained.DrainStrategy.Deadline, 30 * 60 * 1e9);
  assert.equal(drained.SchedulingEligibility, 'ineligible');
  await page.waitForSelector('#stop-drain');
  await page.click('#stop-drain');
  await waitFor('the drain to stop', async () => {
    const n = await agent.api('GET', `/v1/node/${node.ID}`);
    return n.DrainStrategy === null && n.SchedulingEligibility === 'eligible';
  });
  await page.waitForSelector('#drain');

  // Metadata: a key set in the browser is the node's dynamic metadata; removing it unsets it.
  await setValue(page, '#meta-key', 'rack');
  await setValue(page, '#meta-value', 'r42');
  await page.click('#meta-set');
  await waitFor('the dynamic metadata', async () => {
    const meta = await agent.api('GET', `/v1/client/metadata?node_id=${node.ID}`);
    return meta.Dynamic?.rack === 'r42' && meta.Meta.rack === 'r42';
  });
  await waitFor('the node to carry it', async () => (await agent.api('GET', `/v1/node/${node.ID}`)).Meta.rack === 'r42');
  await page.waitForFunction(() => document.querySelector('tr[data-meta="rack"]')?.innerText.includes('r42'), { polling: 100 });
  await clickText(page, 'tr[data-meta="rack"] button', 'Remove');
  await clickText(page, 'tr[data-meta="rack"] button', 'Remove rack?');
  await waitFor('the key to be unset', async () => (await agent.api('GET', `/v1/node/${node.ID}`)).Meta.rack === undefined);
  await page.waitForFunction(() => !document.querySelector('tr[data-meta="rack"]'), { polling: 100 });
});

const DESCRIBED = `job "described" {
  type = "service"

  ui {
    description = "Serves the team's dashboards"

    link {
      label = "Runbook"
      url   = "https://runbooks.example.com/described"
    }

    link {
      label = "Dashboard"
      url   = "https://grafana.example.com/d/described"
    }
  }

  group "web" {
    task "sleeper" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`;

test("job page: the ui block's description and links, the JSON definition, start and purge", async (t) => {
  if (missingBrowser(t)) return;
  const agent = await startAgent();
  t.after(() => agent.stop());
  await agent.runHcl(DESCRIBED);
  const browser = await launchBrowser();
  t.after(() => browser.close());
  const page = await newPage(browser, t);
  await page.goto(`${agent.address}/ui/jobs/described`);

  // The ui block: the description, and each link with its label and address.
  await page.waitForSelector('.job-ui');
  assert.equal(await textOf(page, '.job-ui p'), "Serves the team's dashboards");
  const links = await page.$$eval('.job-ui a', (as) => as.map((a) => [a.textContent, a.getAttribute('href')]));
  assert.deepEqual(links, [
    ['Runbook', 'https://runbooks.example.com/described'],
    ['Dashboard', 'https://grafana.example.com/d/described'],
  ]);

  // The JSON definition: once the page has caught up with the job, what it shows is the job
  // the API serves, field for field.
  await clickText(page, '.tabs a', 'Definition');
  await clickText(page, '.toolbar button', 'JSON');
  await waitFor('the JSON definition to match the API', async () => {
    const shown = JSON.parse(await textOf(page, '#definition'));
    const job = await agent.api('GET', '/v1/job/described');
    if (shown.ModifyIndex !== job.ModifyIndex) return false;
    assert.deepEqual(shown, job);
    return true;
  });

  // Start: a stopped job is started again from its page (a new version, Stop false).
  await agent.api('DELETE', '/v1/job/described');
  await page.waitForSelector('#start-job');
  const stopped = await agent.api('GET', '/v1/job/described');
  assert.equal(stopped.Stop, true);
  await page.click('#start-job');
  await waitFor('the job to start', async () => {
    const job = await agent.api('GET', '/v1/job/described');
    return job.Stop === false && job.Version > stopped.Version;
  });
  await waitFor('its allocation to run again', async () =>
    (await agent.api('GET', '/v1/job/described/allocations')).some((a) => a.ClientStatus === 'running' && a.DesiredStatus === 'run'));

  // Stop, then purge: the job is gone from the API and the page returns to the list.
  await page.waitForSelector('#stop-job');
  await page.click('#stop-job');
  await page.click('#stop-job'); // confirm
  await page.waitForSelector('#purge-job');
  await page.click('#purge-job');
  await page.click('#purge-job'); // confirm
  await waitFor('the job to be purged', async () => (await fetch(`${agent.address}/v1/job/described`)).status === 404);
  await page.waitForFunction(() => location.pathname.endsWith('/ui/jobs'), { polling: 100 });
});
