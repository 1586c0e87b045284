// Run a job: paste or edit a jobspec (HCL2, with its variables), plan it to see the diff and
// what the scheduler would place, then run it with the plan's JobModifyIndex so nobody's change
// in between is overwritten.
import { useEffect, useState } from 'preact/hooks';
import { getJSON, qs, send } from '../api';
import { jobPath, navigate, type Location } from '../router';
import { DiffView, type JobDiff } from '../diff';

interface PlanResponse {
  JobModifyIndex: number;
  Diff?: JobDiff;
  Annotations?: { DesiredTGUpdates?: Record<string, Record<string, number>> };
  FailedTGAllocs?: Record<string, { NodesEvaluated: number; NodesFiltered?: number; NodesExhausted?: number; ConstraintFiltered?: Record<string, number>; DimensionExhausted?: Record<string, number> }> | null;
  Warnings?: string;
}

const EXAMPLE = `job "example" {
  type = "service"

  group "app" {
    count = 1

    task "server" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do date; sleep 5; done"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
`;

export function RunPage({ loc }: { loc: Location }) {
  const editing = loc.query.get('edit');
  const namespace = loc.query.get('namespace') ?? 'default';
  const [source, setSource] = useState(editing ? '' : (sessionStorage.getItem('drover.run.source') ?? EXAMPLE));
  const [variables, setVariables] = useState('');
  const [plan, setPlan] = useState<{ job: any; result: PlanResponse } | null>(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    if (!editing) return;
    getJSON<{ Version: number }>(`v1/job/${editing}${qs({ namespace })}`)
      .then(({ data }) => getJSON<{ Source: string; Variables: string }>(`v1/job/${editing}/submission${qs({ namespace, version: data.Version })}`))
      .then(({ data }) => { setSource(data.Source); setVariables(data.Variables ?? ''); })
      .catch((e) => setError(`cannot load the job's jobspec: ${e.message}`));
  }, [editing]);

  const edit = (text: string) => {
    setSource(text); setPlan(null);
    if (!editing) sessionStorage.setItem('drover.run.source', text);
  };

  const doPlan = async () => {
    setBusy(true); setError(''); setPlan(null);
    try {
      const job = await send('POST', 'v1/jobs/parse', { JobHCL: source, Variables: variables, Canonicalize: true });
      const ns = job.Namespace || namespace;
      const result = await send<PlanResponse>('POST', `v1/job/${encodeURIComponent(job.ID)}/plan${qs({ namespace: ns })}`, { Job: job, Diff: true });
      setPlan({ job, result });
    } catch (e) { setError((e as Error).message); } finally { setBusy(false); }
  };

  const doRun = async () => {
    if (!plan) return;
    setBusy(true); setError('');
    try {
      const job = plan.job;
      const ns = job.Namespace || namespace;
      await send('POST', `v1/jobs${qs({ namespace: ns })}`, {
        Job: job, EnforceIndex: true, JobModifyIndex: plan.result.JobModifyIndex,
        Submission: { Source: source, Format: 'hcl2', Variables: variables },
      });
      sessionStorage.removeItem('drover.run.source');
      navigate(jobPath(job.ID, ns));
    } catch (e) { setError((e as Error).message); setPlan(null); } finally { setBusy(false); }
  };

  const updates = plan?.result.Annotations?.DesiredTGUpdates ?? {};
  const failed = plan?.result.FailedTGAllocs ?? {};
  return (
    <div>
      <div class="page-head"><h1>{editing ? `Edit ${editing}` : 'Run a job'}</h1></div>
      <label class="block">Jobspec (HCL2 or JSON)
        <textarea id="jobspec" class="code" rows={22} spellcheck={false} value={source}
          onInput={(e) => edit((e.target as HTMLTextAreaElement).value)} />
      </label>
      <details>
        <summary>Variables</summary>
        <textarea id="job-variables" class="code" rows={4} spellcheck={false} placeholder={'name = "value"'}
          value={variables} onInput={(e) => { setVariables((e.target as HTMLTextAreaElement).value); setPlan(null); }} />
      </details>
      <div class="toolbar">
        <button id="plan" class="primary" disabled={busy || !source.trim()} onClick={doPlan}>Plan</button>
        {plan ? <button id="run" class="primary" disabled={busy} onClick={doRun}>Run</button> : null}
        {plan ? <button onClick={() => setPlan(null)}>Cancel</button> : null}
      </div>
      {error ? <div class="error" role="alert" id="run-error">{error}</div> : null}
      {plan ? (
        <div id="plan-result">
          <h2>Plan</h2>
          <DiffView diff={plan.result.Diff} />
          <h3>Scheduler</h3>
          <ul>
            {Object.entries(updates).map(([group, u]) => (
              <li>{group}: {Object.entries(u).filter(([, n]) => n > 0).map(([k, n]) => `${n} ${k.toLowerCase()}`).join(', ') || 'no change'}</li>
            ))}
          </ul>
          {Object.keys(failed).length ? (
            <div class="error">
              {Object.entries(failed).map(([group, f]) => (
                <div>Group {group} cannot be placed: {f.NodesEvaluated} nodes evaluated
                  {f.ConstraintFiltered ? `; filtered by ${Object.entries(f.ConstraintFiltered).map(([c, n]) => `${c} (${n})`).join(', ')}` : ''}
                  {f.DimensionExhausted ? `; exhausted ${Object.entries(f.DimensionExhausted).map(([c, n]) => `${c} (${n})`).join(', ')}` : ''}</div>
              ))}
            </div>
          ) : <p class="ok">All placements fit.</p>}
          {plan.result.Warnings ? <div class="warning">{plan.result.Warnings}</div> : null}
          <p class="muted">Running submits against job modify index {plan.result.JobModifyIndex}: if the job changed since this plan, the run is refused.</p>
        </div>
      ) : null}
    </div>
  );
}
