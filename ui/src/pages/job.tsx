// One job: its groups (counts, scaling, summary), allocations, versions with their diffs and
// revert, deployments with promote and fail, evaluations, and its definition (JSON and the
// submitted HCL). Every part is a live blocking query.
import { useState } from 'preact/hooks';
import { qs, send, useLive } from '../api';
import { Link, jobPath, navigate, type Location } from '../router';
import { ActionButton } from '../confirm';
import { DiffView, type JobDiff } from '../diff';
import { usePermissions } from '../acl';
import { Ago, ErrorBox, Loading, NotAllowed, Section, Status, SummaryBar, Tabs, shortId, type GroupSummary } from '../widgets';
import { AllocationsTable, type AllocStub } from './allocs-table';

interface Job {
  ID: string; Name: string; Namespace: string; Type: string; Status: string; Stop: boolean; Version: number;
  Priority: number; Datacenters: string[]; NodePool?: string; JobModifyIndex: number; Stable?: boolean;
  SubmitTime?: number; Periodic?: { Enabled: boolean; Spec: string } | null;
  ParameterizedJob?: { Payload: string; MetaRequired?: string[]; MetaOptional?: string[] } | null;
  ParentID?: string; Meta?: Record<string, string>;
  UI?: { Description?: string; Links?: { Label: string; URL: string }[] } | null;
  TaskGroups: { Name: string; Count: number; Scaling?: { Min?: number; Max?: number; Enabled?: boolean } | null; Tasks: { Name: string; Driver: string }[] }[];
}

export function JobPage({ id, loc }: { id: string; loc: Location }) {
  const namespace = loc.query.get('namespace') ?? 'default';
  const tab = loc.query.get('tab') ?? 'overview';
  const enc = encodeURIComponent(id);
  const nsq = qs({ namespace });
  const job = useLive<Job>(`v1/job/${enc}${nsq}`);
  const j = job.data;
  const base = (t: string) => jobPath(id, namespace, t === 'overview' ? undefined : t);
  return (
    <div>
      <div class="page-head">
        <h1>{j?.Name ?? id} {j ? <Status value={j.Stop && j.Status !== 'dead' ? 'stopping' : j.Status} /> : null}</h1>
        {j ? <JobActions key={`${j.Namespace}/${j.ID}`} job={j} /> : null}
      </div>
      <ErrorBox error={job.error} />
      {j ? (
        <>
          <dl class="facts">
            <dt>Type</dt><dd>{j.Type}{j.Periodic?.Enabled ? ` (periodic ${j.Periodic.Spec})` : ''}{j.ParameterizedJob ? ' (parameterized)' : ''}</dd>
            <dt>Namespace</dt><dd>{j.Namespace}</dd>
            <dt>Version</dt><dd>{j.Version}</dd>
            <dt>Priority</dt><dd>{j.Priority}</dd>
            <dt>Datacenters</dt><dd>{(j.Datacenters ?? []).join(', ')}</dd>
            {j.NodePool ? <><dt>Node pool</dt><dd>{j.NodePool}</dd></> : null}
            {j.ParentID ? <><dt>Parent</dt><dd><Link to={jobPath(j.ParentID, j.Namespace)}>{j.ParentID}</Link></dd></> : null}
          </dl>
          {j.UI && (j.UI.Description || j.UI.Links?.length) ? (
            <div class="job-ui">
              {j.UI.Description ? <p>{j.UI.Description}</p> : null}
              {(j.UI.Links ?? []).map((l) => <a href={l.URL} target="_blank" rel="noopener noreferrer" class="button">{l.Label}</a>)}
            </div>
          ) : null}
          <Tabs current={tab} base={base} tabs={[['overview', 'Overview'], ['versions', 'Versions'], ['deployments', 'Deployments'], ['evaluations', 'Evaluations'], ['definition', 'Definition']]} />
          {tab === 'overview' ? <Overview job={j} nsq={nsq} enc={enc} /> : null}
          {tab === 'versions' ? <Versions job={j} nsq={nsq} enc={enc} /> : null}
          {tab === 'deployments' ? <Deployments nsq={nsq} enc={enc} /> : null}
          {tab === 'evaluations' ? <Evaluations nsq={nsq} enc={enc} /> : null}
          {tab === 'definition' ? <Definition job={j} nsq={nsq} enc={enc} /> : null}
        </>
      ) : !job.error ? <Loading what="the job" /> : null}
    </div>
  );
}

function JobActions({ job }: { job: Job }) {
  const enc = encodeURIComponent(job.ID);
  const nsq = qs({ namespace: job.Namespace });
  const [dispatching, setDispatching] = useState(false);
  const perms = usePermissions();
  if (!perms) return null;
  const submit = perms.can('submit-job', job.Namespace);
  const dispatch = perms.can('dispatch-job', job.Namespace);
  if (!submit && !(dispatch && job.ParameterizedJob)) {
    return <div class="actions"><NotAllowed what="start, stop or change this job" needs="submit-job" /></div>;
  }
  if (!submit) {
    return (
      <div class="actions">
        <button onClick={() => setDispatching(!dispatching)}>Dispatch…</button>
        {dispatching ? <Dispatch job={job} /> : null}
      </div>
    );
  }
  return (
    <div class="actions">
      {job.Periodic?.Enabled ? <ActionButton id="force-launch" label="Force launch" run={() => send('POST', `v1/job/${enc}/periodic/force${nsq}`)} /> : null}
      {job.ParameterizedJob && dispatch ? <button onClick={() => setDispatching(!dispatching)}>Dispatch…</button> : null}
      {job.Stop
        ? <ActionButton key="start" id="start-job" label="Start" run={() => send('POST', `v1/job/${enc}${nsq}`, { Job: { ...job, Stop: false } })} />
        : <ActionButton key="stop" id="stop-job" label="Stop" confirm="Yes, stop the job" danger run={() => send('DELETE', `v1/job/${enc}${nsq}`)} />}
      {job.Stop ? <ActionButton id="purge-job" label="Purge" confirm="Yes, purge it" danger run={async () => { await send('DELETE', `v1/job/${enc}${qs({ namespace: job.Namespace, purge: true })}`); navigate('jobs'); }} /> : null}
      {dispatching ? <Dispatch job={job} /> : null}
    </div>
  );
}

function Dispatch({ job }: { job: Job }) {
  const [meta, setMeta] = useState('');
  const [payload, setPayload] = useState('');
  const [error, setError] = useState('');
  const submit = async () => {
    setError('');
    try {
      const Meta: Record<string, string> = {};
      for (const line of meta.split('\n').map((l) => l.trim()).filter(Boolean)) {
        const at = line.indexOf('=');
        if (at < 1) throw new Error(`meta line ${JSON.stringify(line)} is not key=value`);
        Meta[line.slice(0, at)] = line.slice(at + 1);
      }
      const Payload = payload ? btoa(unescape(encodeURIComponent(payload))) : undefined;
      const reply = await send<{ DispatchedJobID: string }>('POST', `v1/job/${encodeURIComponent(job.ID)}/dispatch${qs({ namespace: job.Namespace })}`, { JobID: job.ID, Meta, Payload });
      navigate(jobPath(reply.DispatchedJobID, job.Namespace));
    } catch (e) { setError((e as Error).message); }
  };
  return (
    <div class="panel">
      <label>Meta (key=value per line{job.ParameterizedJob?.MetaRequired?.length ? `; required: ${job.ParameterizedJob.MetaRequired.join(', ')}` : ''})
        <textarea rows={3} value={meta} onInput={(e) => setMeta((e.target as HTMLTextAreaElement).value)} /></label>
      {job.ParameterizedJob?.Payload !== 'forbidden' ? <label>Payload<textarea rows={3} value={payload} onInput={(e) => setPayload((e.target as HTMLTextAreaElement).value)} /></label> : null}
      <button class="primary" onClick={submit}>Dispatch</button>
      {error ? <div class="error">{error}</div> : null}
    </div>
  );
}

function Overview({ job, nsq, enc }: { job: Job; nsq: string; enc: string }) {
  const summary = useLive<{ Summary: Record<string, GroupSummary> }>(`v1/job/${enc}/summary${nsq}`);
  const allocs = useLive<AllocStub[]>(`v1/job/${enc}/allocations${nsq}`);
  return (
    <>
      <Section title="Task groups">
        <table class="list" id="task-groups">
          <thead><tr><th>Name</th><th>Count</th><th>Tasks</th><th>Allocations</th><th></th></tr></thead>
          <tbody>
            {job.TaskGroups.map((g) => (
              <tr data-group={g.Name}>
                <td>{g.Name}</td>
                <td>{g.Count}</td>
                <td>{g.Tasks.map((t) => `${t.Name} (${t.Driver})`).join(', ')}</td>
                <td><SummaryBar summary={summary.data?.Summary?.[g.Name]} /></td>
                <td>{job.Type !== 'system' && job.Type !== 'sysbatch' && !job.ParameterizedJob && !job.Periodic?.Enabled ? <Scale job={job} group={g} /> : null}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
      <Section title="Allocations">
        <ErrorBox error={allocs.error} />
        {allocs.data ? <AllocationsTable allocs={allocs.data} /> : <Loading />}
      </Section>
    </>
  );
}

function Scale({ job, group }: { job: Job; group: Job['TaskGroups'][number] }) {
  const perms = usePermissions();
  const allowed = !!perms && (perms.can('scale-job', job.Namespace) || perms.can('submit-job', job.Namespace));
  const scale = (count: number) =>
    send('POST', `v1/job/${encodeURIComponent(job.ID)}/scale${qs({ namespace: job.Namespace })}`, {
      Count: count, Target: { Namespace: job.Namespace, Job: job.ID, Group: group.Name }, Message: 'scaled from the web UI',
    });
  const min = group.Scaling?.Min ?? 0;
  const max = group.Scaling?.Max;
  if (!allowed) return null;
  return (
    <span class="scale">
      <ActionButton label="−" disabled={group.Count <= min} run={() => scale(group.Count - 1)} />
      <ActionButton label="+" disabled={max !== undefined && max !== null && group.Count >= max} run={() => scale(group.Count + 1)} />
    </span>
  );
}

function Versions({ job, nsq, enc }: { job: Job; nsq: string; enc: string }) {
  const live = useLive<{ Versions: (Job & { Stable: boolean })[]; Diffs?: JobDiff[] }>(`v1/job/${enc}/versions${nsq}${nsq ? '&' : '?'}diffs=true`);
  const [open, setOpen] = useState<number | null>(null);
  const perms = usePermissions();
  const submit = !!perms && perms.can('submit-job', job.Namespace);
  if (live.error) return <ErrorBox error={live.error} />;
  if (!live.data) return <Loading />;
  return (
    <ol class="versions">
      {live.data.Versions.map((v, i) => (
        <li data-version={v.Version}>
          <div class="row">
            <strong>Version {v.Version}</strong>
            {v.Stable ? <span class="tag">stable</span> : null}
            <Ago ns={v.SubmitTime} />
            {live.data!.Diffs?.[i] ? <button onClick={() => setOpen(open === v.Version ? null : v.Version)}>{open === v.Version ? 'Hide changes' : 'Changes'}</button> : null}
            {v.Version !== job.Version ? (!submit ? null :
              <ActionButton label="Revert" confirm={`Revert to ${v.Version}?`} run={() =>
                send('POST', `v1/job/${enc}/revert${nsq}`, { JobID: job.ID, JobVersion: v.Version, Namespace: job.Namespace })} />
            ) : <span class="muted">current</span>}
          </div>
          {open === v.Version ? <DiffView diff={live.data!.Diffs?.[i]} /> : null}
        </li>
      ))}
    </ol>
  );
}

interface Deployment {
  ID: string; Namespace?: string; JobVersion: number; Status: string; StatusDescription: string; IsMultiregion?: boolean;
  TaskGroups: Record<string, { DesiredTotal: number; PlacedAllocs: number; HealthyAllocs: number; UnhealthyAllocs: number; DesiredCanaries: number; PlacedCanaries?: string[]; Promoted: boolean; AutoPromote?: boolean }>;
}

function Deployments({ nsq, enc }: { nsq: string; enc: string }) {
  const live = useLive<Deployment[]>(`v1/job/${enc}/deployments${nsq}`);
  if (live.error) return <ErrorBox error={live.error} />;
  if (!live.data) return <Loading />;
  if (live.data.length === 0) return <p class="empty">No deployments.</p>;
  return <>{live.data.map((d) => <DeploymentCard d={d} />)}</>;
}

export function DeploymentCard({ d }: { d: Deployment }) {
  const perms = usePermissions();
  const active = (d.Status === 'running' || d.Status === 'paused' || d.Status === 'pending' || d.Status === 'blocked')
    && !!perms && perms.can('submit-job', d.Namespace ?? 'default');
  const canaries = Object.values(d.TaskGroups ?? {}).some((g) => g.DesiredCanaries > 0 && !g.Promoted);
  return (
    <div class="panel deployment" data-deployment={d.ID}>
      <div class="row">
        <span class="mono">{shortId(d.ID)}</span> <span>version {d.JobVersion}</span> <Status value={d.Status} />
        <span class="muted">{d.StatusDescription}</span>
        {active && canaries ? <ActionButton label="Promote" run={() => send('POST', `v1/deployment/promote/${d.ID}`, { DeploymentID: d.ID, All: true })} /> : null}
        {active ? <ActionButton label="Fail" danger confirm="Yes, fail it" run={() => send('POST', `v1/deployment/fail/${d.ID}`, { DeploymentID: d.ID })} /> : null}
      </div>
      <table class="list">
        <thead><tr><th>Group</th><th>Desired</th><th>Placed</th><th>Healthy</th><th>Unhealthy</th><th>Canaries</th><th>Promoted</th></tr></thead>
        <tbody>{Object.entries(d.TaskGroups ?? {}).map(([name, g]) => (
          <tr><td>{name}</td><td>{g.DesiredTotal}</td><td>{g.PlacedAllocs}</td><td>{g.HealthyAllocs}</td><td>{g.UnhealthyAllocs}</td>
            <td>{g.PlacedCanaries?.length ?? 0}/{g.DesiredCanaries}</td><td>{g.Promoted ? 'yes' : 'no'}</td></tr>
        ))}</tbody>
      </table>
    </div>
  );
}

export interface Evaluation {
  ID: string; Type: string; TriggeredBy: string; Status: string; StatusDescription?: string; JobID: string; Namespace: string;
  Priority: number; NodeID?: string; CreateTime?: number; ModifyTime?: number; BlockedEval?: string;
  FailedTGAllocs?: Record<string, unknown> | null;
}

export function EvaluationsTable({ evals, showJob }: { evals: Evaluation[]; showJob?: boolean }) {
  if (evals.length === 0) return <p class="empty">No evaluations.</p>;
  return (
    <table class="list">
      <thead><tr><th>ID</th>{showJob ? <th>Job</th> : null}<th>Priority</th><th>Triggered by</th><th>Status</th><th>Placement failures</th><th>Created</th></tr></thead>
      <tbody>{evals.map((e) => (
        <tr data-eval={e.ID}>
          <td class="mono" title={e.ID}>{shortId(e.ID)}</td>
          {showJob ? <td><Link to={jobPath(e.JobID, e.Namespace)}>{e.JobID}</Link></td> : null}
          <td>{e.Priority}</td><td>{e.TriggeredBy}</td><td><Status value={e.Status} /> <span class="muted">{e.StatusDescription}</span></td>
          <td>{e.FailedTGAllocs && Object.keys(e.FailedTGAllocs).length ? Object.keys(e.FailedTGAllocs).join(', ') : 'none'}</td>
          <td><Ago ns={e.CreateTime} /></td>
        </tr>
      ))}</tbody>
    </table>
  );
}

function Evaluations({ nsq, enc }: { nsq: string; enc: string }) {
  const live = useLive<Evaluation[]>(`v1/job/${enc}/evaluations${nsq}`);
  if (live.error) return <ErrorBox error={live.error} />;
  if (!live.data) return <Loading />;
  return <EvaluationsTable evals={live.data} />;
}

function Definition({ job, nsq, enc }: { job: Job; nsq: string; enc: string }) {
  const [format, setFormat] = useState<'hcl' | 'json'>('hcl');
  const source = useLive<{ Source: string; Format: string }>(`v1/job/${enc}/submission${nsq}${nsq ? '&' : '?'}version=${job.Version}`);
  const hasSource = !!source.data?.Source;
  const shown = format === 'hcl' && hasSource ? source.data!.Source : JSON.stringify(job, null, 2);
  return (
    <div>
      <div class="toolbar">
        <button class={format === 'hcl' ? 'active' : ''} onClick={() => setFormat('hcl')} disabled={!hasSource}
          title={hasSource ? '' : 'this version was not submitted as a jobspec'}>Jobspec</button>
        <button class={format === 'json' || !hasSource ? 'active' : ''} onClick={() => setFormat('json')}>JSON</button>
        <Link to={`jobs/run?edit=${enc}&namespace=${encodeURIComponent(job.Namespace)}`} class="button">Edit and plan</Link>
      </div>
      <pre class="code" id="definition">{shown}</pre>
    </div>
  );
}
