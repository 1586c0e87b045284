// The cluster: clients (attributes, drivers, allocations, drain and eligibility, metadata),
// servers, and the topology (each client's memory and CPU and what holds it).
import { useEffect, useState } from 'preact/hooks';
import { getJSON, qs, send, useLive } from '../api';
import { Link } from '../router';
import { ActionButton } from '../confirm';
import { usePermissions } from '../acl';
import { ErrorBox, Loading, NotAllowed, Section, Status, shortId } from '../widgets';
import { AllocationsTable, type AllocStub } from './allocs-table';

interface NodeStub {
  ID: string; Name: string; Datacenter: string; NodeClass: string; NodePool?: string; Status: string;
  SchedulingEligibility: string; Drain: boolean; Version?: string; Address?: string;
  NodeResources?: { Cpu?: { CpuShares: number }; Memory?: { MemoryMB: number } };
  ReservedResources?: { Cpu?: { CpuShares: number }; Memory?: { MemoryMB: number } };
}

export function ClientsPage() {
  const live = useLive<NodeStub[]>('v1/nodes?resources=true');
  return (
    <div>
      <div class="page-head"><h1>Clients</h1></div>
      <ErrorBox error={live.error} />
      {live.data ? (
        <table class="list" id="clients-table">
          <thead><tr><th>ID</th><th>Name</th><th>Address</th><th>Datacenter</th><th>Node pool</th><th>Class</th><th>Status</th><th>Eligibility</th><th>Drain</th><th>Version</th></tr></thead>
          <tbody>{live.data.map((n) => (
            <tr data-node={n.ID}>
              <td><Link to={`clients/${n.ID}`} class="mono">{shortId(n.ID)}</Link></td><td>{n.Name}</td><td>{n.Address ?? ''}</td>
              <td>{n.Datacenter}</td><td>{n.NodePool ?? ''}</td><td>{n.NodeClass || '-'}</td>
              <td><Status value={n.Status} /></td><td>{n.SchedulingEligibility}</td><td>{n.Drain ? 'draining' : 'no'}</td><td>{n.Version ?? ''}</td>
            </tr>
          ))}</tbody>
        </table>
      ) : !live.error ? <Loading /> : null}
    </div>
  );
}

interface Node extends NodeStub {
  HTTPAddr: string; Attributes: Record<string, string>; Meta?: Record<string, string>;
  Drivers?: Record<string, { Detected: boolean; Healthy: boolean; HealthDescription: string }>;
  DrainStrategy?: { Deadline: number; ForceDeadline?: string } | null;
  Events?: { Message: string; Subsystem: string; Timestamp: string }[];
}

export function ClientPage({ id }: { id: string }) {
  const live = useLive<Node>(`v1/node/${id}`);
  const allocs = useLive<AllocStub[]>(`v1/node/${id}/allocations`);
  const [deadline, setDeadline] = useState('1h');
  const perms = usePermissions();
  const n = live.data;
  return (
    <div>
      <div class="page-head">
        <h1>Client {n?.Name ?? shortId(id)} {n ? <Status value={n.Status} /> : null}</h1>
        {n && perms && !perms.nodeWrite ? <div class="actions"><NotAllowed what="drain this client or change its eligibility or metadata" needs="node write" /></div> : null}
        {n && perms?.nodeWrite ? (
          <div class="actions">
            {n.SchedulingEligibility === 'eligible'
              ? <ActionButton key="ineligible" id="make-ineligible" label="Make ineligible" run={() => send('POST', `v1/node/${n.ID}/eligibility`, { NodeID: n.ID, Eligibility: 'ineligible' })} />
              : <ActionButton key="eligible" id="make-eligible" label="Make eligible" disabled={n.Drain} run={() => send('POST', `v1/node/${n.ID}/eligibility`, { NodeID: n.ID, Eligibility: 'eligible' })} />}
            {n.Drain
              ? <ActionButton key="stop-drain" id="stop-drain" label="Stop drain" run={() => send('POST', `v1/node/${n.ID}/drain`, { NodeID: n.ID, DrainSpec: null, MarkEligible: true })} />
              : <span class="action">
                  <input aria-label="drain deadline" size={5} value={deadline} onInput={(e) => setDeadline((e.target as HTMLInputElement).value)} />
                  <ActionButton id="drain" label="Drain" confirm="Yes, drain it" danger run={() => send('POST', `v1/node/${n.ID}/drain`, { NodeID: n.ID, DrainSpec: { Deadline: parseDuration(deadline), IgnoreSystemJobs: false } })} />
                </span>}
          </div>
        ) : null}
      </div>
      <ErrorBox error={live.error} />
      {n ? (
        <>
          <dl class="facts">
            <dt>ID</dt><dd class="mono">{n.ID}</dd>
            <dt>Address</dt><dd>{n.HTTPAddr}</dd>
            <dt>Datacenter</dt><dd>{n.Datacenter}</dd>
            <dt>Node pool</dt><dd>{n.NodePool ?? 'default'}</dd>
            <dt>Eligibility</dt><dd>{n.SchedulingEligibility}</dd>
            <dt>Drain</dt><dd>{n.Drain ? 'draining' : 'no'}</dd>
            <dt>CPU / memory</dt><dd>{n.NodeResources?.Cpu?.CpuShares ?? 0} MHz / {n.NodeResources?.Memory?.MemoryMB ?? 0} MiB</dd>
          </dl>
          <Section title="Allocations">
            {allocs.data ? <AllocationsTable allocs={allocs.data} showJob /> : <Loading />}
          </Section>
          <Section title="Drivers">
            <table class="list" id="drivers">
              <thead><tr><th>Driver</th><th>Detected</th><th>Healthy</th><th>Description</th></tr></thead>
              <tbody>{Object.entries(n.Drivers ?? {}).sort().map(([name, d]) => (
                <tr><td>{name}</td><td>{d.Detected ? 'yes' : 'no'}</td><td>{d.Healthy ? 'yes' : 'no'}</td><td>{d.HealthDescription}</td></tr>
              ))}</tbody>
            </table>
          </Section>
          <Section title="Metadata">{perms?.nodeWrite ? <NodeMeta node={n} /> : <KeyValues values={n.Meta ?? {}} />}</Section>
          <Section title="Attributes"><KeyValues values={n.Attributes ?? {}} /></Section>
          {n.Events?.length ? (
            <Section title="Events">
              <table class="list"><thead><tr><th>Time</th><th>Subsystem</th><th>Message</th></tr></thead>
                <tbody>{[...n.Events].reverse().map((e) => <tr><td>{new Date(e.Timestamp).toLocaleString()}</td><td>{e.Subsystem}</td><td>{e.Message}</td></tr>)}</tbody></table>
            </Section>
          ) : null}
        </>
      ) : !live.error ? <Loading /> : null}
    </div>
  );
}

/** The node's metadata, its dynamic part editable (`/v1/client/metadata`, as Nomad's UI):
 * a key set here overrides the client's static `meta`, and a dynamic key can be removed. */
function NodeMeta({ node }: { node: Node }) {
  const meta = node.Meta ?? {};
  // Which keys are dynamic: read again whenever the node's merged copy moves.
  const [dynamic, setDynamic] = useState<Record<string, string | null>>({});
  const [error, setError] = useState('');
  useEffect(() => {
    let gone = false;
    getJSON<{ Dynamic?: Record<string, string | null> }>(`v1/client/metadata${qs({ node_id: node.ID })}`)
      .then(({ data }) => { if (!gone) { setDynamic(data.Dynamic ?? {}); setError(''); } })
      .catch((e) => { if (!gone) setError((e as Error).message); });
    return () => { gone = true; };
  }, [node.ID, JSON.stringify(meta)]);
  const [key, setKey] = useState('');
  const [value, setValue] = useState('');
  const apply = async (change: Record<string, string | null>) => {
    await send('POST', `v1/client/metadata${qs({ node_id: node.ID })}`, { NodeID: node.ID, Meta: change });
  };
  return (
    <>
      <div class="toolbar" id="meta-editor">
        <input id="meta-key" aria-label="metadata key" placeholder="key" value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)} />
        <input id="meta-value" aria-label="metadata value" placeholder="value" value={value} onInput={(e) => setValue((e.target as HTMLInputElement).value)} />
        <ActionButton id="meta-set" label="Set" disabled={!key.trim()} run={async () => { await apply({ [key.trim()]: value }); setKey(''); setValue(''); }} />
      </div>
      {error ? <div class="error">{error}</div> : null}
      <table class="list kv" id="node-meta"><tbody>{Object.entries(meta).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => (
        <tr data-meta={k}><td class="mono">{k}</td><td class="mono">{v}</td>
          <td>{typeof dynamic[k] === 'string'
            ? <ActionButton label="Remove" confirm={`Remove ${k}?`} run={() => apply({ [k]: null })} />
            : <span class="muted">static</span>}</td></tr>
      ))}</tbody></table>
    </>
  );
}

function KeyValues({ values }: { values: Record<string, string> }) {
  const [filter, setFilter] = useState('');
  const entries = Object.entries(values).sort(([a], [b]) => a.localeCompare(b))
    .filter(([k, v]) => !filter || k.includes(filter) || v.includes(filter));
  return (
    <>
      <input type="search" placeholder="Filter" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
      <table class="list kv"><tbody>{entries.map(([k, v]) => <tr><td class="mono">{k}</td><td class="mono">{v}</td></tr>)}</tbody></table>
    </>
  );
}

/** A Go duration ("1h30m", "90s") in nanoseconds; a bare number is seconds. */
export function parseDuration(text: string): number {
  const units: Record<string, number> = { ns: 1, us: 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };
  if (/^\d+$/.test(text.trim())) return Number(text) * 1e9;
  let total = 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)/g;
  let match: RegExpExecArray | null;
  let consumed = '';
  while ((match = re.exec(text.trim()))) { total += Number(match[1]) * units[match[2]]; consumed += match[0]; }
  if (consumed !== text.trim()) throw new Error(`${JSON.stringify(text)} is not a duration such as 1h or 30m`);
  return total;
}

export function ServersPage() {
  const live = useLive<{ Members: { Name: string; Addr: string; Port: number; Status: string; Tags: Record<string, string> }[] }>('v1/agent/members');
  const leader = useLive<string>('v1/status/leader');
  return (
    <div>
      <div class="page-head"><h1>Servers</h1></div>
      <ErrorBox error={live.error} />
      {live.data ? (
        <table class="list" id="servers-table">
          <thead><tr><th>Name</th><th>Address</th><th>Status</th><th>Leader</th><th>Region</th><th>Datacenter</th><th>Version</th></tr></thead>
          <tbody>{live.data.Members.map((m) => (
            <tr><td>{m.Name}</td><td>{m.Addr}:{m.Port}</td><td><Status value={m.Status} /></td>
              <td>{leader.data && leader.data.startsWith(m.Addr + ':') ? 'yes' : ''}</td>
              <td>{m.Tags?.region}</td><td>{m.Tags?.dc}</td><td>{m.Tags?.build}</td></tr>
          ))}</tbody>
        </table>
      ) : !live.error ? <Loading /> : null}
    </div>
  );
}

interface AllocWithResources extends AllocStub {
  AllocatedResources?: { Tasks?: Record<string, { Cpu?: { CpuShares: number }; Memory?: { MemoryMB: number } }> };
}

export function TopologyPage() {
  const nodes = useLive<NodeStub[]>('v1/nodes?resources=true');
  const allocs = useLive<AllocWithResources[]>('v1/allocations' + qs({ resources: true, namespace: '*', task_states: false }));
  if (nodes.error || allocs.error) return <div><h1>Topology</h1><ErrorBox error={nodes.error ?? allocs.error} /></div>;
  if (!nodes.data || !allocs.data) return <div><h1>Topology</h1><Loading /></div>;
  const running = allocs.data.filter((a) => a.ClientStatus === 'running' || a.ClientStatus === 'pending');
  const use = (a: AllocWithResources) => Object.values(a.AllocatedResources?.Tasks ?? {}).reduce(
    (acc, t) => ({ cpu: acc.cpu + (t.Cpu?.CpuShares ?? 0), mem: acc.mem + (t.Memory?.MemoryMB ?? 0) }), { cpu: 0, mem: 0 });
  const byDc = new Map<string, NodeStub[]>();
  for (const n of nodes.data) byDc.set(n.Datacenter, [...(byDc.get(n.Datacenter) ?? []), n]);
  return (
    <div>
      <div class="page-head"><h1>Topology</h1><span class="muted">{nodes.data.length} clients, {running.length} running allocations</span></div>
      {[...byDc.entries()].map(([dc, list]) => (
        <Section title={`Datacenter ${dc}`}>
          {list.map((n) => {
            const mine = running.filter((a) => a.NodeID === n.ID);
            const cap = { cpu: n.NodeResources?.Cpu?.CpuShares ?? 0, mem: n.NodeResources?.Memory?.MemoryMB ?? 0 };
            return (
              <div class="panel topo-node" data-node={n.ID}>
                <div class="row"><Link to={`clients/${n.ID}`}>{n.Name}</Link> <Status value={n.Status} /> <span class="muted">{mine.length} allocations</span></div>
                {(['mem', 'cpu'] as const).map((dim) => {
                  const total = mine.reduce((s, a) => s + use(a)[dim], 0);
                  return (
                    <div class="topo-row">
                      <span class="topo-label">{dim === 'mem' ? `Memory ${total}/${cap.mem} MiB` : `CPU ${total}/${cap.cpu} MHz`}</span>
                      <span class="topo-bar">{mine.map((a) => {
                        const share = cap[dim] ? (use(a)[dim] / cap[dim]) * 100 : 0;
                        return <Link to={`allocations/${a.ID}`} title={`${a.Name}: ${use(a)[dim]}${dim === 'mem' ? ' MiB' : ' MHz'}`}><span class={`topo-alloc s-${a.ClientStatus}`} style={{ width: `${share}%` }} /></Link>;
                      })}</span>
                    </div>
                  );
                })}
              </div>
            );
          })}
        </Section>
      ))}
    </div>
  );
}
