// The app: the header (navigation, sign-in state), the routes, and keyboard shortcuts
// (`/` search, `g j` jobs, `g c` clients, `g s` servers, `g t` topology, `g e` evaluations,
// `g v` variables, `g r` run a job).
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import '@xterm/xterm/css/xterm.css';
import './style.css';
import { getToken } from './api';
import { Link, navigate, useLocation } from './router';
import { JobsPage } from './pages/jobs';
import { JobPage } from './pages/job';
import { RunPage } from './pages/run';
import { AllocPage } from './pages/alloc';
import { TokensPage } from './pages/tokens';
import { ClientsPage, ClientPage, ServersPage, TopologyPage } from './pages/cluster';
import { EvaluationsPage, NamespacesPage, NodePoolsPage, VariablesPage, VariablePage, ServicesPage } from './pages/more';

const NAV: [string, string][] = [
  ['jobs', 'Jobs'], ['clients', 'Clients'], ['servers', 'Servers'], ['topology', 'Topology'],
  ['evaluations', 'Evaluations'], ['variables', 'Variables'], ['services', 'Services'],
  ['namespaces', 'Namespaces'], ['node-pools', 'Node pools'],
];

function useSignedIn(): boolean {
  const [signed, setSigned] = useState(!!getToken());
  useEffect(() => {
    const update = () => setSigned(!!getToken());
    window.addEventListener('drover-token', update);
    return () => window.removeEventListener('drover-token', update);
  }, []);
  return signed;
}

function Page() {
  const loc = useLocation();
  const parts = loc.path.split('/').filter(Boolean).map(decodeURIComponent);
  const [section = 'jobs', id, sub] = parts;
  switch (section) {
    case 'jobs':
      if (id === 'run' && !sub) return <RunPage loc={loc} />;
      return id ? <JobPage id={id} loc={loc} key={id} /> : <JobsPage loc={loc} />;
    case 'allocations': return id ? <AllocPage id={id} loc={loc} key={id} /> : <NotFound />;
    case 'clients': return id ? <ClientPage id={id} key={id} /> : <ClientsPage />;
    case 'servers': return <ServersPage />;
    case 'topology': return <TopologyPage />;
    case 'evaluations': return <EvaluationsPage />;
    case 'variables': return id ? <VariablePage path={parts.slice(1).join('/')} loc={loc} /> : <VariablesPage loc={loc} />;
    case 'services': return <ServicesPage />;
    case 'namespaces': return <NamespacesPage />;
    case 'node-pools': return <NodePoolsPage />;
    case 'settings': return <TokensPage />;
    default: return <NotFound />;
  }
}

function NotFound() {
  return <div><h1>Not found</h1><p>No page here. <Link to="jobs">Go to the jobs</Link>.</p></div>;
}

function App() {
  const loc = useLocation();
  const signedIn = useSignedIn();
  const section = loc.path.split('/')[0] || 'jobs';
  useEffect(() => {
    let pendingG = false;
    const onKey = (event: KeyboardEvent) => {
      const target = event.target as HTMLElement;
      if (target && (target.tagName === 'INPUT' || target.tagName === 'TEXTAREA' || target.tagName === 'SELECT' || target.isContentEditable)) return;
      if (target?.closest?.('.terminal')) return;
      if (event.metaKey || event.ctrlKey || event.altKey) return;
      if (event.key === '/') {
        const search = document.querySelector<HTMLInputElement>('input[type=search]');
        if (search) { event.preventDefault(); search.focus(); }
        return;
      }
      if (pendingG) {
        pendingG = false;
        const to: Record<string, string> = { j: 'jobs', c: 'clients', s: 'servers', t: 'topology', e: 'evaluations', v: 'variables', r: 'jobs/run' };
        if (to[event.key]) { event.preventDefault(); navigate(to[event.key]); }
        return;
      }
      if (event.key === 'g') pendingG = true;
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, []);
  return (
    <>
      <header class="top">
        <Link to="jobs" class="brand">drover</Link>
        <nav>
          {NAV.map(([to, label]) => <Link to={to} class={section === to ? 'active' : ''}>{label}</Link>)}
        </nav>
        <Link to="settings/tokens" class={`signin ${section === 'settings' ? 'active' : ''}`}>{signedIn ? 'Token set' : 'Sign in'}</Link>
      </header>
      <main><Page /></main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
