// The web UI in a real browser (Debian's chromium, headless) against a real drover agent with
// real jobs: the path a new user takes (the jobs list, running a job from the editor, its
// allocation, logs and exec terminal, stopping it), every page with live data, ACLs on, and
// the UI behind a reverse proxy under /nomad/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clickText, launchBrowser, missingBrowser, newPage, setValue, startAgent, startProxy, textOf, waitFor, waitForText } from './harness.mjs';

// A job that writes to both streams and keeps running, registered from the browser's editor.
const DEMO = `job "ui-demo" {
  type = "service"

  group "app" {
    task "ticker" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo hello-stdout; echo to-stderr >&2; i=0; while true; do i=$((i+1)); echo tick $i; sleep 1; done"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`;

// A job registered through the API before the browser opens, with a catalog service.
const SEED = `job "seed" {
  type = "service"

  group "web" {
    service {
      name     = "seed-svc"
      provider = "nomad"
    }

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

const job = (name) => SEED.replace('job "seed"', `job "${name}"`).replace('seed-svc', `${name}-svc`);

async function waitForRunningAlloc(page) {
  await page.waitForFunction(() => [...document.querySelectorAll('table.allocs tbody tr')]
    .some((row) => row.innerText.includes('running')), { polling: 100 });
}

/** Opens the exec tab's terminal, types `echo hi` and waits for the answer line. */
async function execEchoHi(page) {
  await clickText(page, '.tabs a', 'Exec');
  await page.waitForSelector('#exec-open:not([disabled])');
  await page.click('#exec-open');
  await page.waitForFunction(() => document.querySelector('#exec-status')?.textContent === 'connected', { polling: 100 });
  await page.waitForSelector('.xterm-rows');
  // Keys go to the focused element: the terminal takes focus once connected, which on a loaded
  // machine can come after the first keys, so it is focused here before typing.
  await page.focus('.xterm-helper-textarea');
  await page.waitForFunction(() => document.activeElement?.classList.contains('xterm-helper-textarea'), { polling: 100 });
  await page.keyboard.type('echo hi\n');
  await page.waitForFunction(() => (document.querySelector('.xterm-rows')?.innerText ?? '')
    .split('\n').some((line) => line.trim() === 'hi'), { polling: 100 });
}

test('a new user sees the running job, runs one from the editor, reads its logs, execs into it and stops it', async (t) => {
  if (missingBrowser(t)) return;
  const agent = await startAgent();
  t.after(() => agent.stop());
  await agent.runHcl(SEED);
  const browser = await launchBrowser();
  t.after(() => browser.close());
  const page = await newPage(browser, t);

  // `/` lands on the jobs list, which shows the job running.
  await page.goto(agent.address + '/');
  assert.match(page.url(), /\/ui\/$/);
  await page.waitForFunction(() => document.querySelector('tr[data-job="seed"]')?.innerText.includes('running'), { polling: 100 });

  // Live: a job registered elsewhere appears without a reload.
  await agent.runHcl(job('later'));
  await page.waitForSelector('tr[data-job="later"]');

  // Search narrows the list (a server-side filter); clearing it brings everything back.
  await setValue(page, '#job-search', 'lat');
  await page.waitForFunction(() => !document.querySelector('tr[data-job="seed"]') && !!document.querySelector('tr[data-job="later"]'), { polling: 100 });
  await setValue(page, '#job-search', '');
  await page.waitForSelector('tr[data-job="seed"]');

  // Run a job from the editor: plan shows the diff and the placement, run submits it.
  await page.waitForSelector('a.button.primary');
  await page.click('a.button.primary'); // "Run job"
  await page.waitForSelector('#jobspec');
  await setValue(page, '#jobspec', DEMO);
  await page.click('#plan');
  await page.waitForSelector('#plan-result');
  const plan = await textOf(page, '#plan-result');
  assert.match(plan, /\+ Job: "ui-demo"/);
  assert.match(plan, /app: 1 place/);
  await page.click('#run');
  await page.waitForFunction(() => location.pathname.endsWith('/ui/jobs/ui-demo'), { polling: 100 });
  await waitForRunningAlloc(page);

  // The definition tab shows the jobspec as submitted.
  await clickText(page, '.tabs a', 'Definition');
  await page.waitForFunction(() => document.querySelector('#definition')?.textContent.includes('job "ui-demo"'), { polling: 100 });
  await clickText(page, '.tabs a', 'Overview');
  await waitForRunningAlloc(page);

  // Its allocation: the task and its events.
  await page.click('table.allocs tbody tr a.mono');
  await page.waitForFunction(() => location.pathname.includes('/ui/allocations/'), { polling: 100 });
  await waitForText(page, 'Task ticker');
  await page.waitForFunction(() => document.querySelector('table.events')?.innerText.includes('Started'), { polling: 100 });

  // Logs: stdout followed live, filtered, stderr.
  await clickText(page, '.tabs a', 'Logs');
  await page.waitForFunction(() => /tick \d+/.test(document.querySelector('#log-output')?.textContent ?? ''), { polling: 100 });
  const before = await textOf(page, '#log-output');
  await page.waitForFunction((n) => (document.querySelector('#log-output')?.textContent ?? '').length > n, { polling: 100 }, before.length);
  await setValue(page, '#log-filter', 'hello');
  await page.waitForFunction(() => {
    const text = document.querySelector('#log-output')?.textContent ?? '';
    return text.includes('hello-stdout') && !text.includes('tick');
  }, { polling: 100 });
  await setValue(page, '#log-filter', '');
  await page.click('#stderr');
  await page.waitForFunction(() => (document.querySelector('#log-output')?.textContent ?? '').includes('to-stderr'), { polling: 100 });

  // The exec terminal: a shell in the task, `echo hi` answered.
  await execEchoHi(page);

  // Restart all tasks: a Restart Signaled event comes in live.
  await clickText(page, '.tabs a', 'Tasks');
  await page.click('#restart-all');
  await page.click('#restart-all'); // confirm
  await page.waitForFunction(() => document.querySelector('table.events')?.innerText.includes('Restart Signaled'), { polling: 100 });

  // Stop the job from its page; the status turns dead without a reload.
  await page.click('.facts a'); // the job link
  await page.waitForSelector('#stop-job');
  await page.click('#stop-job');
  await page.click('#stop-job'); // confirm
  await page.waitForFunction(() => ['dead', 'stopping'].some((s) => document.querySelector('h1')?.innerText.includes(s)), { polling: 100 });
  await waitFor('the job to be stopped', async () => (await agent.api('GET', '/v1/job/ui-demo')).Stop === true);
  await page.waitForSelector('#start-job');
});

test('every page shows the live cluster: clients, servers, topology, evaluations, variables, services, versions', async (t) => {
  if (missingBrowser(t)) return;
  const agent = await startAgent();
  t.after(() => agent.stop());
  await agent.runHcl(SEED);
  const browser = await launchBrowser();
  t.after(() => browser.close());
  const page = await newPage(browser, t);
  const nodes = await agent.api('GET', '/v1/nodes');
  const node = nodes[0];

  await page.goto(agent.address + '/ui/clients');
  await page.waitForSelector(`tr[data-node="${node.ID}"]`);
  await page.click(`tr[data-node="${node.ID}"] a`);
  await page.waitForFunction(() => document.querySelector('#drivers')?.innerText.includes('raw_exec'), { polling: 100 });
  await waitForRunningAlloc(page);
  // Eligibility from the client page, seen in the API and back on the page.
  await page.click('#make-ineligible');
  await page.waitForSelector('#make-eligible');
  assert.equal((await agent.api('GET', `/v1/node/${node.ID}`)).SchedulingEligibility, 'ineligible');
  await page.click('#make-eligible');
  await page.waitForSelector('#make-ineligible');

  // An allocation's resource charts fill from the stats endpoint.
  const [alloc] = await agent.api('GET', '/v1/job/seed/allocations');
  await page.goto(`${agent.address}/ui/allocations/${alloc.ID}`);
  await page.waitForFunction(() => document.querySelectorAll('#memory-chart polyline')[0]?.getAttribute('points')?.split(' ').length >= 2, { polling: 200 });
  assert.match(await textOf(page, '#memory-chart figcaption'), /^Memory [\d.]+ (B|KiB|MiB) \/ 32 MiB$/);

  await page.goto(agent.address + '/ui/namespaces');
  await page.waitForFunction(() => document.querySelector('#namespaces-table')?.innerText.includes('default'), { polling: 100 });
  await page.goto(agent.address + '/ui/node-pools');
  await page.waitForFunction(() => document.querySelector('#node-pools-table')?.innerText.includes('default'), { polling: 100 });

  await page.goto(agent.address + '/ui/servers');
  await page.waitForFunction(() => document.querySelector('#servers-table')?.innerText.includes('alive'), { polling: 100 });

  await page.goto(agent.address + '/ui/topology');
  await page.waitForSelector(`.topo-node[data-node="${node.ID}"] .topo-alloc`);

  await page.goto(agent.address + '/ui/evaluations');
  await page.waitForFunction(() => document.querySelector('table.list')?.innerText.includes('seed'), { polling: 100 });

  await page.goto(agent.address + '/ui/services');
  await page.waitForFunction(() => document.querySelector('#services-table')?.innerText.includes('seed-svc'), { polling: 100 });

  // Variables: create one in the browser, read it through the API, delete it.
  await page.goto(agent.address + '/ui/variables');
  await setValue(page, '#new-var-path', 'ui/test');
  await (await page.waitForSelector('#new-var:not([disabled])')).click();
  await page.waitForSelector('#var-items input[aria-label="key"]');
  await setValue(page, '#var-items input[aria-label="key"]', 'color');
  await setValue(page, '#var-items input[aria-label="value"]', 'blue');
  await page.click('#save-var');
  await waitFor('the variable to be written', async () => (await agent.api('GET', '/v1/var/ui/test')).Items.color === 'blue');
  await page.waitForSelector('#delete-var');
  await page.goto(agent.address + '/ui/variables');
  await page.waitForFunction(() => document.querySelector('#variables-table')?.innerText.includes('ui/test'), { polling: 100 });

  // A new version of the seed job: the versions tab shows both and the diff between them.
  const edited = SEED.replace('args    = ["3600"]', 'args    = ["3601"]');
  await agent.runHcl(edited);
  await page.goto(agent.address + '/ui/jobs/seed?tab=versions');
  await page.waitForSelector('li[data-version="1"]');
  await clickText(page, 'li[data-version="1"] button', 'Changes');
  await page.waitForFunction(() => document.querySelector('.diff')?.innerText.includes('3601'), { polling: 100 });
  await page.goto(agent.address + '/ui/jobs/seed?tab=evaluations');
  await page.waitForSelector('tr[data-eval]');
  await page.goto(agent.address + '/ui/jobs/seed?tab=deployments');
  await page.waitForSelector('.deployment');
});

test('with ACLs on, the UI asks for a token, and signed in it shows the jobs', async (t) => {
  if (missingBrowser(t)) return;
  const agent = await startAgent({ acl: true });
  t.after(() => agent.stop());
  await agent.runHcl(SEED);
  const browser = await launchBrowser();
  t.after(() => browser.close());
  const page = await newPage(browser, t);

  await page.goto(agent.address + '/ui/jobs');
  await waitForText(page, 'Not authorized');
  assert.equal(await page.$('tr[data-job="seed"]'), null);

  await page.click('header .signin');
  await page.waitForSelector('#token-secret');
  await setValue(page, '#token-secret', 'not-a-token');
  await page.click('#sign-in');
  await waitForText(page, 'That token was refused');

  await setValue(page, '#token-secret', agent.token);
  await page.click('#sign-in');
  await page.waitForSelector('tr[data-job="seed"]');
  // The token stays in the browser: a reload still sees the jobs.
  await page.reload();
  await page.waitForSelector('tr[data-job="seed"]');
  await page.goto(agent.address + '/ui/jobs/seed');
  await waitForRunningAlloc(page);
  // The exec terminal under ACLs: the token rides in the websocket's first message.
  await page.click('table.allocs tbody tr a.mono');
  await execEchoHi(page);
  // A read-only token: the pages still show the cluster, and no action it may not take is
  // offered (stop, exec, restart, signal, drain), each place saying which capability it needs.
  const allocPath = new URL(page.url()).pathname;
  const policy = 'namespace "default" {\n  policy = "read"\n}\nnode {\n  policy = "read"\n}\n';
  await agent.api('POST', '/v1/acl/policy/reader', { Name: 'reader', Rules: policy });
  const reader = await agent.api('POST', '/v1/acl/token', { Name: 'reader', Type: 'client', Policies: ['reader'] });
  await page.evaluate((secret) => localStorage.setItem('drover.token', secret), reader.SecretID);
  await page.reload();
  await waitForText(page, 'Your token may not exec into this allocation (needs alloc-exec)');
  await waitForText(page, 'Your token may not restart, signal or stop this allocation');
  for (const selector of ['#exec-open', '#restart-all', '#stop-alloc']) assert.equal(await page.$(selector), null, selector);
  assert.ok(!(await page.$$eval('.tabs a', (as) => as.map((a) => a.textContent))).includes('Exec'));
  await page.goto(agent.address + allocPath);
  await waitForText(page, 'Task sleeper');
  assert.ok(!(await page.$$eval('section button, section a.button', (bs) => bs.map((b) => b.textContent))).some((t) => t === 'Restart' || t === 'Exec'));
  await page.goto(agent.address + '/ui/jobs/seed');
  await waitForRunningAlloc(page);
  await waitForText(page, 'Your token may not start, stop or change this job (needs submit-job)');
  assert.equal(await page.$('#stop-job'), null);
  const [node] = await agent.api('GET', '/v1/nodes');
  await page.goto(`${agent.address}/ui/clients/${node.ID}`);
  await page.waitForFunction(() => document.querySelector('#drivers')?.innerText.includes('raw_exec'), { polling: 100 });
  await waitForText(page, 'Your token may not drain this client');
  for (const selector of ['#drain', '#make-ineligible', '#meta-set']) assert.equal(await page.$(selector), null, selector);
  await page.goto(agent.address + '/ui/jobs');
  await page.waitForSelector('tr[data-job="seed"]');
  await waitForText(page, 'Your token may not run jobs (needs submit-job)');
  assert.equal(await page.$('a.button.primary'), null, 'the Run job button');

  // A client token whose policies allow writes (not a management token): the actions come back.
  const writes = 'namespace "default" {\n  policy = "write"\n}\nnode {\n  policy = "write"\n}\n';
  await agent.api('POST', '/v1/acl/policy/operator', { Name: 'operator', Rules: writes });
  const operator = await agent.api('POST', '/v1/acl/token', { Name: 'operator', Type: 'client', Policies: ['operator'] });
  await page.evaluate((secret) => localStorage.setItem('drover.token', secret), operator.SecretID);
  await page.goto(agent.address + '/ui/jobs/seed');
  await page.waitForSelector('#stop-job');
  await page.goto(`${agent.address}/ui/clients/${node.ID}`);
  await page.waitForSelector('#drain');
  await page.goto(agent.address + allocPath + '?tab=exec');
  await page.waitForSelector('#exec-open');

  await page.goto(agent.address + '/ui/settings/tokens');
  await page.click('#sign-out');
  await page.goto(agent.address + '/ui/jobs');
  await waitForText(page, 'Not authorized');
});

test("with ACLs on, a variable's save and delete show only for a token that may write or destroy its path", async (t) => {
  if (missingBrowser(t)) return;
  const agent = await startAgent({ acl: true });
  t.after(() => agent.stop());
  for (const path of ['app/config', 'shared/info']) {
    await agent.api('PUT', `/v1/var/${path}`, { Namespace: 'default', Path: path, Items: { key: 'value' } });
  }
  // Write (not destroy) under app/, read elsewhere; the namespace itself is read-only.
  const rules = 'namespace "default" {\n  policy = "read"\n  variables {\n'
    + '    path "app/*" {\n      capabilities = ["read", "write"]\n    }\n'
    + '    path "*" {\n      capabilities = ["read", "list"]\n    }\n  }\n}\n';
  await agent.api('POST', '/v1/acl/policy/vars-writer', { Name: 'vars-writer', Rules: rules });
  const writer = await agent.api('POST', '/v1/acl/token', { Name: 'vars-writer', Type: 'client', Policies: ['vars-writer'] });
  const browser = await launchBrowser();
  t.after(() => browser.close());
  const page = await newPage(browser, t);
  await page.goto(agent.address + '/ui/jobs');
  await page.evaluate((secret) => localStorage.setItem('drover.token', secret), writer.SecretID);

  // A path it may write but not destroy: save, no delete.
  await page.goto(agent.address + '/ui/variables/app/config');
  await page.waitForSelector('#save-var');
  await waitForText(page, 'Your token may not delete this variable (needs destroy)');
  assert.equal(await page.$('#delete-var'), null, 'delete on a path without destroy');
  assert.equal(await page.$eval('#var-items input[aria-label="value"]', (input) => input.value), 'value');
  // A path it may only read: neither, the items read-only.
  await page.goto(agent.address + '/ui/variables/shared/info');
  await waitForText(page, 'Your token may not change this variable (needs write)');
  await waitForText(page, 'Your token may not delete this variable (needs destroy)');
  assert.equal(await page.$eval('#var-items input[aria-label="value"]', (input) => input.value), 'value');
  assert.ok(await page.$eval('#var-items input[aria-label="value"]', (input) => input.readOnly));
  for (const selector of ['#save-var', '#delete-var', '#add-var-item']) assert.equal(await page.$(selector), null, selector);
  // Creating: refused for a path it may not write, offered for one it may.
  await page.goto(agent.address + '/ui/variables');
  await page.waitForSelector('#variables-table');
  await setValue(page, '#new-var-path', 'shared/new');
  await waitForText(page, 'Your token may not write variables at shared/new (needs write)');
  assert.ok(await page.$eval('#new-var', (button) => button.disabled));
  await setValue(page, '#new-var-path', 'app/new');
  await page.waitForSelector('#new-var:not([disabled])');

  // With destroy on the path as well (another policy), the delete comes back and works.
  const destroy = 'namespace "default" {\n  variables {\n    path "app/*" {\n      capabilities = ["destroy"]\n    }\n  }\n}\n';
  await agent.api('POST', '/v1/acl/policy/vars-destroyer', { Name: 'vars-destroyer', Rules: destroy });
  const both = await agent.api('POST', '/v1/acl/token', { Name: 'both', Type: 'client', Policies: ['vars-writer', 'vars-destroyer'] });
  await page.evaluate((secret) => localStorage.setItem('drover.token', secret), both.SecretID);
  await page.goto(agent.address + '/ui/variables/app/config');
  await page.waitForSelector('#delete-var');
  await page.click('#delete-var');
  await clickText(page, 'button', 'Yes, delete it');
  await waitFor('the variable to be deleted', async () => {
    const listed = await agent.api('GET', '/v1/vars?prefix=app/');
    return listed.length === 0;
  });
});

test('behind a reverse proxy under /nomad/ the UI, its API calls and the exec terminal work', async (t) => {
  if (missingBrowser(t)) return;
  const agent = await startAgent();
  t.after(() => agent.stop());
  await agent.runHcl(SEED);
  const proxy = await startProxy(agent.address);
  t.after(() => proxy.close());
  const browser = await launchBrowser();
  t.after(() => browser.close());
  const page = await newPage(browser, t);
  const direct = [];
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.port === String(agent.port)) direct.push(request.url());
  });

  await page.goto(proxy.address + '/nomad/');
  assert.equal(new URL(page.url()).pathname, '/nomad/ui/');
  await page.waitForSelector('tr[data-job="seed"] a');
  await page.click('tr[data-job="seed"] a');
  await page.waitForFunction(() => location.pathname === '/nomad/ui/jobs/seed', { polling: 100 });
  await waitForRunningAlloc(page);
  await page.click('table.allocs tbody tr a.mono');
  await waitForText(page, 'Task sleeper');
  await execEchoHi(page);
  // A reload of a deep link comes back through the proxy too.
  await page.reload();
  await page.waitForSelector('#exec-open');
  assert.deepEqual(direct, [], 'requests that bypassed the proxy');
});

test('job actions: scale a group, revert a version, force a periodic launch, dispatch a parameterized job', async (t) => {
  if (missingBrowser(t)) return;
  const agent = await startAgent();
  t.after(() => agent.stop());
  await agent.runHcl(SEED);
  await agent.runHcl(SEED.replace('args    = ["3600"]', 'args    = ["3601"]'));
  await agent.runHcl(`job "nightly" {
  type = "batch"

  periodic {
    crons            = ["0 3 * * *"]
    prohibit_overlap = true
  }

  group "g" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }
    }
  }
}
`);
  await agent.runHcl(`job "resize" {
  type = "batch"

  parameterized {
    payload       = "optional"
    meta_required = ["size"]
  }

  group "g" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }
    }
  }
}
`);
  const browser = await launchBrowser();
  t.after(() => browser.close());
  const page = await newPage(browser, t);

  // Scale: + on the group's row raises its count, seen live in the table. (A batch job: a
  // service job's first deployment blocks scaling until it is done, which the UI shows.)
  await agent.runHcl(job('scaler').replace('type = "service"', 'type = "batch"'));
  await page.goto(agent.address + '/ui/jobs/scaler');
  await page.waitForSelector('tr[data-group="web"] .scale button');
  await clickText(page, 'tr[data-group="web"] .scale button', '+');
  await waitFor('the count to be 2', async () => (await agent.api('GET', '/v1/job/scaler')).TaskGroups[0].Count === 2);
  await page.waitForFunction(() => document.querySelector('tr[data-group="web"]')?.children[1]?.textContent === '2', { polling: 100 });
  await page.goto(agent.address + '/ui/jobs/seed');

  // Revert to version 0 from the versions tab.
  await clickText(page, '.tabs a', 'Versions');
  await page.waitForSelector('li[data-version="0"] button');
  await clickText(page, 'li[data-version="0"] button', 'Revert');
  await clickText(page, 'li[data-version="0"] button', 'Revert to 0?');
  await waitFor('the revert', async () => {
    const job = await agent.api('GET', '/v1/job/seed');
    return job.Version === 2 && job.TaskGroups[0].Tasks[0].Config.args[0] === '3600';
  });

  // A periodic job's forced launch makes a child job.
  await page.goto(agent.address + '/ui/jobs/nightly');
  await page.waitForSelector('#force-launch:not([disabled])');
  // The element's own click: a click at the button's coordinates can land elsewhere when the
  // page's layout moves between finding the button and clicking (the page still loading).
  await page.$eval('#force-launch', (button) => button.click());
  await waitFor('a periodic child', async () => {
    const refused = await page.$eval('.inline-error', (el) => el.textContent).catch(() => null);
    if (refused) throw new Error(`the force launch said: ${refused}`);
    return (await agent.api('GET', '/v1/jobs?prefix=nightly/periodic-')).length === 1;
  });

  // Dispatch with meta, landing on the dispatched job's page.
  await page.goto(agent.address + '/ui/jobs/resize');
  await clickText(page, '.actions button', 'Dispatch…');
  await page.waitForSelector('.panel textarea');
  // Typed as a user types it, and seen in the field before the click.
  await page.type('.panel textarea', 'size=large');
  await page.waitForFunction(() => document.querySelector('.panel textarea')?.value === 'size=large', { polling: 100 });
  await clickText(page, '.panel button', 'Dispatch');
  // The dispatched job's page, or the panel's error (named in the failure).
  await page.waitForFunction(() => decodeURIComponent(location.pathname).includes('/ui/jobs/resize/dispatch-')
    || document.querySelector('.panel .error'), { polling: 100 });
  const refused = await page.$eval('.panel .error', (el) => el.textContent).catch(() => null);
  assert.equal(refused, null, `the dispatch panel said: ${refused}`);
  assert.ok(decodeURIComponent(await page.evaluate(() => location.pathname)).includes('/ui/jobs/resize/dispatch-'));
  const children = await agent.api('GET', '/v1/jobs?prefix=resize/dispatch-');
  assert.equal(children.length, 1);
  assert.equal((await agent.api('GET', `/v1/job/${encodeURIComponent(children[0].ID)}`)).Meta.size, 'large');
});

test('deployments: promote a canary, fail a rollout', async (t) => {
  if (missingBrowser(t)) return;
  const agent = await startAgent();
  t.after(() => agent.stop());
  const canaried = (arg) => SEED
    .replace('group "web" {', `group "web" {
    update {
      canary           = 1
      min_healthy_time = "1s"
      healthy_deadline = "1m"
      progress_deadline = "2m"
    }
`)
    .replace('args    = ["3600"]', `args    = ["${arg}"]`);
  await agent.runHcl(canaried('3600'));
  const deployments = () => agent.api('GET', '/v1/job/seed/deployments');
  await waitFor('the first deployment to succeed', async () => (await deployments()).some((d) => d.Status === 'successful'));
  await agent.runHcl(canaried('3601'));
  await waitFor('a healthy canary', async () => (await deployments()).some((d) =>
    d.Status === 'running' && Object.values(d.TaskGroups).some((g) => g.HealthyAllocs >= 1 && g.DesiredCanaries === 1)));
  const browser = await launchBrowser();
  t.after(() => browser.close());
  const page = await newPage(browser, t);

  await page.goto(agent.address + '/ui/jobs/seed?tab=deployments');
  await page.waitForSelector('.deployment button');
  await clickText(page, '.deployment button', 'Promote');
  await waitFor('the promotion', async () => (await deployments()).some((d) => d.JobVersion === 1 && d.TaskGroups.web.Promoted));

  await agent.runHcl(canaried('3602'));
  await page.waitForFunction(() => [...document.querySelectorAll('.deployment')].some((d) => d.innerText.includes('version 2') && d.innerText.includes('Fail')), { polling: 100 });
  const latest = (await deployments()).find((d) => d.JobVersion === 2);
  await clickText(page, `.deployment[data-deployment="${latest.ID}"] button`, 'Fail');
  await clickText(page, `.deployment[data-deployment="${latest.ID}"] button`, 'Yes, fail it');
  await waitFor('the failed deployment', async () => (await deployments()).some((d) => d.ID === latest.ID && d.Status === 'failed'));
  await page.waitForFunction((id) => document.querySelector(`.deployment[data-deployment="${id}"]`)?.innerText.includes('failed'), { polling: 100 }, latest.ID);
});
