// What the browser tests stand on: a real drover agent (the binary the workspace built), the
// Debian chromium driven headless through puppeteer-core, and a small reverse proxy that serves
// an agent under /nomad/ (HTTP and websockets) with X-Forwarded-Prefix.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import http from 'node:http';
import net from 'node:net';
import puppeteer from 'puppeteer-core';

const root = resolve(import.meta.dirname, '..', '..');

export function droverBin() {
  const bin = process.env.DROVER_BIN ?? join(process.env.CARGO_TARGET_DIR ?? join(root, 'target'), 'debug', 'drover');
  if (!existsSync(bin)) throw new Error(`no drover binary at ${bin}: build it (cargo build -p drover) or set DROVER_BIN`);
  return bin;
}

/** The browser, or why there is none. Under CI=true a missing browser fails the tests. */
export function chromiumPath() {
  const candidates = [process.env.CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter(Boolean);
  return candidates.find((path) => existsSync(path));
}

export function missingBrowser(t) {
  if (chromiumPath()) return false;
  const why = 'chromium is not installed (apt-get install chromium, or set CHROMIUM)';
  if (process.env.CI === 'true') throw new Error(why);
  t.skip(why);
  return true;
}

export async function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
    server.on('error', reject);
  });
}

export async function waitFor(what, check, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) { last = error; }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
}

/** A dev agent (server + client) on a free port; `acl` turns ACLs on. */
export async function startAgent({ acl = false, config = '' } = {}) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'drover-ui-test-'));
  const args = ['agent', '-dev', '-http-port', String(port)];
  const text = (acl ? 'acl {\n  enabled = true\n}\n' : '') + config;
  if (text) {
    writeFileSync(join(dir, 'agent.hcl'), text);
    args.push('-config', join(dir, 'agent.hcl'));
  }
  const child = spawn(droverBin(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d) => { output += d; });
  child.stderr.on('data', (d) => { output += d; });
  const address = `http://127.0.0.1:${port}`;
  const agent = {
    address, port, child, token: '',
    output: () => output,
    async api(method, path, body) {
      const headers = { 'Content-Type': 'application/json' };
      if (agent.token) headers['X-Nomad-Token'] = agent.token;
      const response = await fetch(address + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const reply = await response.text();
      if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${reply}`);
      return reply ? JSON.parse(reply) : null;
    },
    async runHcl(hcl) {
      const job = await agent.api('POST', '/v1/jobs/parse', { JobHCL: hcl, Canonicalize: true });
      await agent.api('POST', '/v1/jobs', { Job: job, Submission: { Source: hcl, Format: 'hcl2' } });
      return job;
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => { const timer = setTimeout(() => { child.kill('SIGKILL'); r(); }, 15000); child.on('exit', () => { clearTimeout(timer); r(); }); });
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await waitFor('the agent to answer', async () => {
    if (child.exitCode !== null) throw new Error(`the agent exited: ${output}`);
    const response = await fetch(`${address}/v1/agent/health`).catch(() => null);
    return response && (response.ok || response.status === 403);
  });
  if (acl) {
    const reply = await agent.api('POST', '/v1/acl/bootstrap');
    agent.token = reply.SecretID;
  }
  await waitFor('a ready client node', async () => {
    const nodes = await agent.api('GET', '/v1/nodes');
    return nodes.some((n) => n.Status === 'ready');
  });
  return agent;
}

/** A reverse proxy serving `target` under `/nomad/`, prefix stripped, `X-Forwarded-Prefix` set. */
export async function startProxy(target) {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    if (!req.url.startsWith('/nomad/') && req.url !== '/nomad') {
      res.writeHead(404); res.end('not under /nomad/'); return;
    }
    const path = req.url.slice('/nomad'.length) || '/';
    const forward = http.request({
      host: upstream.hostname, port: upstream.port, method: req.method, path,
      headers: { ...req.headers, host: upstream.host, 'x-forwarded-prefix': '/nomad' },
    }, (reply) => { res.writeHead(reply.statusCode, reply.headers); reply.pipe(res); });
    forward.on('error', (e) => { res.writeHead(502); res.end(String(e)); });
    req.pipe(forward);
  });
  // Websockets (the exec terminal): the upgrade request passed on, then bytes both ways.
  server.on('upgrade', (req, socket, head) => {
    const path = req.url.slice('/nomad'.length) || '/';
    const back = net.connect(Number(upstream.port), upstream.hostname, () => {
      const lines = [`${req.method} ${path} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        const name = req.rawHeaders[i];
        lines.push(`${name}: ${name.toLowerCase() === 'host' ? upstream.host : req.rawHeaders[i + 1]}`);
      }
      lines.push('X-Forwarded-Prefix: /nomad');
      back.write(lines.join('\r\n') + '\r\n\r\n');
      if (head.length) back.write(head);
      back.pipe(socket); socket.pipe(back);
    });
    back.on('error', () => socket.destroy());
    socket.on('error', () => back.destroy());
  });
  const port = await freePort();
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  return { address: `http://127.0.0.1:${port}`, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }) };
}

export async function launchBrowser() {
  return puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--window-size=1280,900'],
    defaultViewport: { width: 1280, height: 900 },
  });
}

/** The text of the first element matching `selector` (or "" when none). */
export async function textOf(page, selector) {
  return page.$eval(selector, (el) => el.textContent ?? '').catch(() => '');
}

/** Waits until the page's body text contains `text`. */
export async function waitForText(page, text, timeout = 60000) {
  await page.waitForFunction((t) => document.body && document.body.innerText.includes(t), { timeout, polling: 100 }, text);
}

/** Clicks the first `selector` whose text is `text`, waiting for it to render (a page that
 * was just navigated to draws its parts as their data arrives). */
export async function clickText(page, selector, text, timeout = 60000) {
  try {
    await page.waitForFunction(
      (s, t) => [...document.querySelectorAll(s)].some((el) => el.textContent?.trim() === t),
      { timeout, polling: 100 }, selector, text);
  } catch {
    throw new Error(`no ${selector} with text ${JSON.stringify(text)}`);
  }
  const handles = await page.$$(selector);
  for (const handle of handles) {
    const content = await handle.evaluate((el) => el.textContent?.trim());
    if (content === text) { await handle.click(); return; }
  }
  throw new Error(`no ${selector} with text ${JSON.stringify(text)}`);
}

/** A page whose script errors fail the test (checked when the test ends). */
export async function newPage(browser, t) {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  t.after(() => assert.deepEqual(errors, [], 'script errors on the page'));
  page.setDefaultTimeout(60000);
  return page;
}

/** Sets a field's value and fires its `input` event, as typing the whole value at once would. */
export async function setValue(page, selector, value) {
  await page.$eval(selector, (el, v) => {
    el.value = v;
    el.dispatchEvent(new Event('input', { bubbles: true }));
  }, value);
}
