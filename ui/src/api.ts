// The HTTP API as the UI calls it: addresses relative to the page's <base> (so a reverse
// proxy's prefix carries over), the ACL token from localStorage as X-Nomad-Token, and
// blocking queries (`index=`) that keep a page live without reloading.
import { useEffect, useState } from 'preact/hooks';

/** The agent's root as the browser reaches it: "/" or "/nomad/" behind a proxy. */
export const apiRoot = new URL('..', document.baseURI).pathname;
/** Where the UI's own pages live: "/ui/" or "/nomad/ui/". */
export const uiRoot = new URL('.', document.baseURI).pathname;

const TOKEN_KEY = 'drover.token';
export const getToken = (): string => localStorage.getItem(TOKEN_KEY) ?? '';
export function setToken(token: string) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
  window.dispatchEvent(new Event('drover-token'));
}

export class ApiError extends Error {
  constructor(public status: number, message: string) {
    super(message);
  }
}

export function url(path: string): string {
  return apiRoot + path.replace(/^\//, '');
}

export async function request(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const token = getToken();
  if (token) headers.set('X-Nomad-Token', token);
  const response = await fetch(url(path), { ...init, headers });
  if (!response.ok) {
    const text = (await response.text()).trim();
    throw new ApiError(response.status, text || response.statusText);
  }
  return response;
}

export async function getJSON<T>(path: string, signal?: AbortSignal): Promise<{ data: T; index: number; nextToken: string }> {
  const response = await request(path, { signal });
  const index = Number(response.headers.get('X-Nomad-Index') ?? '0') || 0;
  const nextToken = response.headers.get('X-Nomad-NextToken') ?? '';
  return { data: (await response.json()) as T, index, nextToken };
}

/** A write: PUT/POST/DELETE with a JSON body; answers the decoded reply (or null). */
export async function send<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await request(path, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
  });
  const text = await response.text();
  return (text ? JSON.parse(text) : null) as T;
}

export interface Live<T> {
  data?: T;
  error?: ApiError | Error;
  index: number;
  /** A paginated list's `X-Nomad-NextToken` ("" on the last page). */
  nextToken?: string;
}

/** How often an endpoint that cannot block is read again. */
const POLL_MS = 5000;

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(timer); resolve(); });
  });

/**
 * `path` read once, then again with `index=<last X-Nomad-Index>` so the agent answers only
 * when something changed: the page follows the cluster live. `null` reads nothing.
 */
export function useLive<T>(path: string | null): Live<T> {
  const [state, setState] = useState<Live<T>>({ index: 0 });
  const [tokenEpoch, setTokenEpoch] = useState(0);
  useEffect(() => {
    const bump = () => setTokenEpoch((n) => n + 1);
    window.addEventListener('drover-token', bump);
    return () => window.removeEventListener('drover-token', bump);
  }, []);
  useEffect(() => {
    setState({ index: 0 });
    if (!path) return;
    const controller = new AbortController();
    const signal = controller.signal;
    (async () => {
      let index = 0;
      while (!signal.aborted) {
        try {
          const sep = path.includes('?') ? '&' : '?';
          const target = index > 0 ? `${path}${sep}index=${index}&wait=300s` : path;
          const asked = Date.now();
          const { data, index: next, nextToken } = await getJSON<T>(target, signal);
          if (signal.aborted) return;
          if (next !== index || index === 0) setState({ data, index: next, nextToken });
          if (next === 0) {
            // An endpoint without blocking queries (no X-Nomad-Index): polled instead.
            await sleep(POLL_MS, signal);
            continue;
          }
          // An answer at once with nothing new would be a busy loop: pause.
          if (next === index && Date.now() - asked < 1000) await sleep(1000, signal);
          // An index that went backwards (a restored server) starts over.
          index = next < index ? 0 : next;
        } catch (error) {
          if (signal.aborted) return;
          setState((s) => ({ ...s, error: error as Error }));
          await sleep(error instanceof ApiError && error.status < 500 ? 5000 : 1000, signal);
        }
      }
    })();
    return () => controller.abort();
  }, [path, tokenEpoch]);
  return state;
}

/** `name=value` pairs as a query string ("" for none), skipping empty values. */
export function qs(params: Record<string, string | number | boolean | undefined | null>): string {
  const parts = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  return parts.length ? '?' + parts.join('&') : '';
}
