// Evaluations, variables (list, read, write, delete) and services.
import { useEffect, useState } from 'preact/hooks';
import { getJSON, qs, send, useLive } from '../api';
import { Link, navigate, type Location } from '../router';
import { ActionButton } from '../confirm';
import { Ago, ErrorBox, Loading, NotAllowed } from '../widgets';
import { usePermissions } from '../acl';
import { EvaluationsTable, type Evaluation } from './job';
import { useNamespaces } from './jobs';

export function EvaluationsPage() {
  const live = useLive<Evaluation[]>('v1/evaluations' + qs({ namespace: '*', per_page: 50, reverse: true }));
  return (
    <div>
      <div class="page-head"><h1>Evaluations</h1></div>
      <ErrorBox error={live.error} />
      {live.data ? <EvaluationsTable evals={live.data} showJob /> : !live.error ? <Loading /> : null}
    </div>
  );
}

interface VariableMeta { Namespace: string; Path: string; CreateTime: number; ModifyTime: number; ModifyIndex: number }

const varPath = (path: string, namespace: string) =>
  `variables/${path.split('/').map(encodeURIComponent).join('/')}${namespace !== 'default' ? qs({ namespace }) : ''}`;

export function VariablesPage({ loc }: { loc: Location }) {
  const prefix = loc.query.get('prefix') ?? '';
  const live = useLive<VariableMeta[]>('v1/vars' + qs({ namespace: '*', prefix }));
  const namespaces = useNamespaces();
  const [path, setPath] = useState('');
  const [namespace, setNamespace] = useState('default');
  const perms = usePermissions();
  const newPath = path.trim();
  // A path the token may not write is refused here, before the editor opens.
  const writable = !!perms && (!newPath || perms.canVariable('write', namespace, newPath));
  return (
    <div>
      <div class="page-head"><h1>Variables</h1></div>
      <div class="toolbar">
        <input type="search" placeholder="Path prefix" value={prefix} onInput={(e) => navigate('variables' + qs({ prefix: (e.target as HTMLInputElement).value }), true)} />
        <span class="action">
          <input id="new-var-path" placeholder="new/variable/path" value={path} onInput={(e) => setPath((e.target as HTMLInputElement).value)} />
          <select value={namespace} onChange={(e) => setNamespace((e.target as HTMLSelectElement).value)}>
            {(namespaces.length ? namespaces : ['default']).map((n) => <option>{n}</option>)}
          </select>
          <button id="new-var" disabled={!newPath || !writable} onClick={() => navigate(varPath(newPath, namespace) + (namespace !== 'default' ? '&' : '?') + 'new=1')}>Create</button>
          {perms && !writable ? <NotAllowed what={`write variables at ${newPath}`} needs="write" /> : null}
        </span>
      </div>
      <ErrorBox error={live.error} />
      {live.data ? (
        live.data.length ? (
          <table class="list" id="variables-table">
            <thead><tr><th>Path</th><th>Namespace</th><th>Modified</th></tr></thead>
            <tbody>{live.data.map((v) => (
              <tr><td><Link to={varPath(v.Path, v.Namespace)}>{v.Path}</Link></td><td>{v.Namespace}</td><td><Ago ns={v.ModifyTime} /></td></tr>
            ))}</tbody>
          </table>
        ) : <p class="empty">No variables.</p>
      ) : !live.error ? <Loading /> : null}
    </div>
  );
}

export function VariablePage({ path, loc }: { path: string; loc: Location }) {
  const namespace = loc.query.get('namespace') ?? 'default';
  const isNew = loc.query.get('new') === '1';
  const [items, setItems] = useState<[string, string][]>(isNew ? [['', '']] : []);
  const [index, setIndex] = useState(0);
  const [error, setError] = useState('');
  const [saved, setSaved] = useState('');
  const api = `v1/var/${path.split('/').map(encodeURIComponent).join('/')}`;
  const perms = usePermissions();
  // Hidden until the permissions are known, then only what the token may do on this path.
  const mayWrite = !!perms && perms.canVariable('write', namespace, path);
  const mayDestroy = !!perms && perms.canVariable('destroy', namespace, path);
  useEffect(() => {
    if (isNew) return;
    getJSON<{ Items: Record<string, string>; ModifyIndex: number }>(api + qs({ namespace }))
      .then(({ data }) => { setItems(Object.entries(data.Items ?? {})); setIndex(data.ModifyIndex); })
      .catch((e) => setError(e.message));
  }, [path, namespace]);
  const save = async () => {
    setError(''); setSaved('');
    const Items = Object.fromEntries(items.filter(([k]) => k.trim()));
    const reply = await send<{ ModifyIndex: number }>('PUT', api + qs({ namespace, cas: index }), { Namespace: namespace, Path: path, Items });
    setIndex(reply?.ModifyIndex ?? index);
    setSaved('Saved.');
    if (isNew) navigate(varPath(path, namespace), true);
  };
  return (
    <div class="narrow">
      <div class="page-head"><h1>Variable <span class="mono">{path}</span></h1>
        {!isNew && mayDestroy ? <ActionButton id="delete-var" label="Delete" danger confirm="Yes, delete it" run={async () => { await send('DELETE', api + qs({ namespace, cas: index })); navigate('variables'); }} /> : null}
      </div>
      {perms && !mayWrite ? <p><NotAllowed what="change this variable" needs="write" /></p> : null}
      {perms && !isNew && !mayDestroy ? <p><NotAllowed what="delete this variable" needs="destroy" /></p> : null}
      <p class="muted">Namespace {namespace}</p>
      {error ? <div class="error" role="alert">{error}</div> : null}
      <table class="list kv" id="var-items">
        <thead><tr><th>Key</th><th>Value</th><th></th></tr></thead>
        <tbody>{items.map(([k, v], i) => (
          <tr>
            <td><input aria-label="key" value={k} readOnly={!mayWrite} onInput={(e) => setItems(items.map((it, j) => j === i ? [(e.target as HTMLInputElement).value, it[1]] : it))} /></td>
            <td><input aria-label="value" value={v} readOnly={!mayWrite} onInput={(e) => setItems(items.map((it, j) => j === i ? [it[0], (e.target as HTMLInputElement).value] : it))} /></td>
            <td>{mayWrite ? <button onClick={() => setItems(items.filter((_, j) => j !== i))}>Remove</button> : null}</td>
          </tr>
        ))}</tbody>
      </table>
      {mayWrite ? (
        <div class="toolbar">
          <button id="add-var-item" onClick={() => setItems([...items, ['', '']])}>Add item</button>
          <ActionButton id="save-var" label="Save" run={() => save().catch((e) => { setError(e.message); })} />
          <span class="ok">{saved}</span>
        </div>
      ) : null}
    </div>
  );
}

interface ServiceRegistration { ID: string; ServiceName: string; Namespace: string; NodeID: string; JobID: string; AllocID: string; Address: string; Port: number; Tags?: string[] }

export function ServicesPage() {
  const live = useLive<{ Namespace: string; Services: { ServiceName: string; Tags?: string[] }[] }[]>('v1/services' + qs({ namespace: '*' }));
  const [open, setOpen] = useState<string | null>(null);
  const rows = (live.data ?? []).flatMap((ns) => ns.Services.map((s) => ({ ...s, Namespace: ns.Namespace })));
  return (
    <div>
      <div class="page-head"><h1>Services</h1></div>
      <ErrorBox error={live.error} />
      {live.data ? (rows.length ? (
        <table class="list" id="services-table">
          <thead><tr><th>Name</th><th>Namespace</th><th>Tags</th></tr></thead>
          <tbody>{rows.map((s) => (
            <>
              <tr><td><a href="#" onClick={(e) => { e.preventDefault(); setOpen(open === s.Namespace + '/' + s.ServiceName ? null : s.Namespace + '/' + s.ServiceName); }}>{s.ServiceName}</a></td>
                <td>{s.Namespace}</td><td>{(s.Tags ?? []).join(', ')}</td></tr>
              {open === s.Namespace + '/' + s.ServiceName ? <tr><td colSpan={3}><Instances name={s.ServiceName} namespace={s.Namespace} /></td></tr> : null}
            </>
          ))}</tbody>
        </table>
      ) : <p class="empty">No services registered.</p>) : !live.error ? <Loading /> : null}
    </div>
  );
}

function Instances({ name, namespace }: { name: string; namespace: string }) {
  const live = useLive<ServiceRegistration[]>(`v1/service/${encodeURIComponent(name)}` + qs({ namespace }));
  if (live.error) return <ErrorBox error={live.error} />;
  if (!live.data) return <Loading />;
  return (
    <table class="list">
      <thead><tr><th>Address</th><th>Job</th><th>Allocation</th></tr></thead>
      <tbody>{live.data.map((r) => (
        <tr><td class="mono">{r.Address}:{r.Port}</td><td>{r.JobID}</td><td><Link to={`allocations/${r.AllocID}`} class="mono">{r.AllocID.slice(0, 8)}</Link></td></tr>
      ))}</tbody>
    </table>
  );
}

export function NamespacesPage() {
  const live = useLive<{ Name: string; Description?: string }[]>('v1/namespaces');
  return (
    <div>
      <div class="page-head"><h1>Namespaces</h1></div>
      <ErrorBox error={live.error} />
      {live.data ? (
        <table class="list" id="namespaces-table">
          <thead><tr><th>Name</th><th>Description</th><th></th></tr></thead>
          <tbody>{live.data.map((n) => (
            <tr><td>{n.Name}</td><td>{n.Description ?? ''}</td><td><Link to={'jobs' + qs({ namespace: n.Name })}>Jobs</Link></td></tr>
          ))}</tbody>
        </table>
      ) : !live.error ? <Loading /> : null}
    </div>
  );
}

export function NodePoolsPage() {
  const live = useLive<{ Name: string; Description?: string; Meta?: Record<string, string> | null }[]>('v1/node/pools');
  return (
    <div>
      <div class="page-head"><h1>Node pools</h1></div>
      <ErrorBox error={live.error} />
      {live.data ? (
        <table class="list" id="node-pools-table">
          <thead><tr><th>Name</th><th>Description</th><th>Meta</th></tr></thead>
          <tbody>{live.data.map((p) => (
            <tr><td>{p.Name}</td><td>{p.Description ?? ''}</td><td class="mono">{Object.entries(p.Meta ?? {}).map(([k, v]) => `${k}=${v}`).join(', ')}</td></tr>
          ))}</tbody>
        </table>
      ) : !live.error ? <Loading /> : null}
    </div>
  );
}
