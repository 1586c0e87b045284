// A small history router: paths under the UI's root (`jobs/web`, `allocations/<id>`), links
// that navigate without reloading, and the current location as state.
import { useEffect, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import { uiRoot } from './api';

export interface Location {
  /** The path under the UI's root, without a leading slash: "jobs/web". */
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  const pathname = location.pathname;
  const path = pathname.startsWith(uiRoot) ? pathname.slice(uiRoot.length) : '';
  return { path: path.replace(/\/$/, ''), query: new URLSearchParams(location.search) };
}

export function navigate(to: string, replace = false) {
  const target = uiRoot + to.replace(/^\//, '');
  if (replace) history.replaceState(null, '', target);
  else history.pushState(null, '', target);
  window.dispatchEvent(new Event('drover-navigate'));
  if (!replace) window.scrollTo(0, 0);
}

export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const update = () => setLoc(current());
    window.addEventListener('popstate', update);
    window.addEventListener('drover-navigate', update);
    return () => {
      window.removeEventListener('popstate', update);
      window.removeEventListener('drover-navigate', update);
    };
  }, []);
  return loc;
}

export function Link(props: { to: string; class?: string; children: ComponentChildren; title?: string }) {
  return (
    <a
      href={uiRoot + props.to.replace(/^\//, '')}
      class={props.class}
      title={props.title}
      onClick={(event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        navigate(props.to);
      }}
    >
      {props.children}
    </a>
  );
}

/** A job's page path: its ID as one segment, the namespace in the query. */
export function jobPath(id: string, namespace = 'default', tab?: string): string {
  const q = new URLSearchParams();
  if (namespace !== 'default') q.set('namespace', namespace);
  if (tab) q.set('tab', tab);
  const s = q.toString();
  return `jobs/${encodeURIComponent(id)}${s ? '?' + s : ''}`;
}
