// Small shared pieces: status badges, the allocation summary bar, times, errors, tabs.
import type { ComponentChildren } from 'preact';
import { ApiError } from './api';
import { Link } from './router';

export function Status({ value }: { value?: string }) {
  const v = value || 'unknown';
  return <span class={`badge s-${v.replace(/[^a-z]/gi, '-').toLowerCase()}`}>{v}</span>;
}

export interface GroupSummary {
  Queued: number; Complete: number; Failed: number; Running: number; Starting: number; Lost: number; Unknown?: number;
}

const PARTS: [keyof GroupSummary, string][] = [
  ['Running', 'running'], ['Starting', 'starting'], ['Queued', 'queued'],
  ['Failed', 'failed'], ['Lost', 'lost'], ['Complete', 'complete'],
];

/** A stacked bar of a summary's allocation counts, with the numbers in its title. */
export function SummaryBar({ summary }: { summary?: Partial<GroupSummary> }) {
  const s = summary ?? {};
  const total = PARTS.reduce((n, [k]) => n + (s[k] ?? 0), 0);
  const title = PARTS.filter(([k]) => (s[k] ?? 0) > 0).map(([k]) => `${k} ${s[k]}`).join(', ') || 'no allocations';
  return (
    <span class="bar" title={title} aria-label={title}>
      {total === 0 ? <span class="bar-empty" /> :
        PARTS.map(([k, cls]) => (s[k] ?? 0) > 0 &&
          <span class={`bar-${cls}`} style={{ flexGrow: s[k] }} />)}
    </span>
  );
}

export function sumSummaries(summary?: Record<string, Partial<GroupSummary>>): GroupSummary {
  const total: GroupSummary = { Queued: 0, Complete: 0, Failed: 0, Running: 0, Starting: 0, Lost: 0 };
  for (const g of Object.values(summary ?? {})) {
    for (const [k] of PARTS) (total as any)[k] += g[k] ?? 0;
  }
  return total;
}

/** A nanosecond (or RFC 3339) time as "12s ago", with the full time in its title. */
export function Ago({ ns, iso }: { ns?: number; iso?: string }) {
  const ms = iso ? Date.parse(iso) : (ns ?? 0) / 1e6;
  if (!ms || ms < 1000) return <span>-</span>;
  const d = new Date(ms);
  const secs = Math.round((Date.now() - ms) / 1000);
  const text = secs < 60 ? `${Math.max(secs, 0)}s ago` : secs < 3600 ? `${Math.round(secs / 60)}m ago`
    : secs < 86400 ? `${Math.round(secs / 3600)}h ago` : d.toLocaleDateString();
  return <time dateTime={d.toISOString()} title={d.toLocaleString()}>{text}</time>;
}

export function ErrorBox({ error }: { error?: Error }) {
  if (!error) return null;
  if (error instanceof ApiError && error.status === 403) {
    return (
      <div class="error" role="alert">
        <strong>Not authorized.</strong> {error.message}. Your token may not read this, or none is set: {' '}
        <Link to="settings/tokens">sign in with an ACL token</Link>.
      </div>
    );
  }
  return <div class="error" role="alert">{error.message}</div>;
}

export function Loading({ what }: { what?: string }) {
  return <p class="muted">Loading{what ? ` ${what}` : ''}…</p>;
}

export function Tabs({ tabs, current, base }: { tabs: [string, string][]; current: string; base: (tab: string) => string }) {
  return (
    <nav class="tabs">
      {tabs.map(([id, label]) => (
        <Link to={base(id)} class={id === current ? 'active' : ''}>{label}</Link>
      ))}
    </nav>
  );
}

export function Section({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section>
      <div class="section-head"><h2>{title}</h2>{actions}</div>
      {children}
    </section>
  );
}

export const shortId = (id?: string) => (id ?? '').slice(0, 8);

export function bytes(n?: number): string {
  if (!n) return '0 B';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

/** Where actions would be that the token may not take: says which capability they need. */
export function NotAllowed({ what, needs }: { what: string; needs: string }) {
  return <span class="muted not-allowed" title={`Sign in with a token that has ${needs}`}>Your token may not {what} (needs {needs})</span>;
}
