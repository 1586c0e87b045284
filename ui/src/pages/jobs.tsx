// The jobs list: live (a blocking query on /v1/jobs), one page at a time (per_page and
// next_token, so 10 000 jobs cost one page), filtered by namespace and by a search on the
// job's ID or name (a server-side filter expression).
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, getToken, qs, request, useLive } from '../api';
import { Link, jobPath, navigate, type Location } from '../router';
import { usePermissions } from '../acl';
import { ErrorBox, Loading, NotAllowed, Status, SummaryBar, sumSummaries, type GroupSummary } from '../widgets';

interface JobStub {
  ID: string; Name: string; Namespace: string; Type: string; Status: string; Priority: number;
  Periodic?: boolean; ParameterizedJob?: boolean; ParentID?: string; Stop?: boolean;
  JobSummary?: { Summary?: Record<string, GroupSummary> };
  Datacenters?: string[]; NodePool?: string; SubmitTime?: number;
}

export const PAGE_SIZE = 25;

function bexprString(text: string): string {
  return '"' + text.replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"';
}

export function useNamespaces(): string[] {
  const live = useLive<{ Name: string }[]>('v1/namespaces');
  return (live.data ?? []).map((n) => n.Name);
}

export function JobsPage({ loc }: { loc: Location }) {
  const namespace = loc.query.get('namespace') ?? '*';
  const search = loc.query.get('search') ?? '';
  const token = loc.query.get('next') ?? '';
  const prev = (loc.query.get('prev') ?? '').split(',').filter(Boolean);
  const [text, setText] = useState(search);
  const input = useRef<HTMLInputElement>(null);
  const namespaces = useNamespaces();
  const perms = usePermissions();

  const go = (params: Record<string, string>) => {
    const merged = { namespace: namespace === '*' ? '' : namespace, search, ...params };
    navigate('jobs' + qs(merged), true);
  };
  useEffect(() => {
    if (text === search) return;
    const timer = setTimeout(() => go({ search: text, next: '', prev: '' }), 200);
    return () => clearTimeout(timer);
  }, [text]);

  const filter = search
    ? `ID contains ${bexprString(search)} or Name contains ${bexprString(search)}`
    : '';
  const path = 'v1/jobs' + qs({ meta: true, namespace, per_page: PAGE_SIZE, next_token: token, filter });
  const live = useLive<JobStub[]>(path);
  const next = live.nextToken ?? '';

  return (
    <div>
      <div class="page-head">
        <h1>Jobs</h1>
        {!perms ? null : perms.can('submit-job', namespace === '*' ? 'default' : namespace)
          ? <Link to="jobs/run" class="button primary">Run job</Link>
          : <NotAllowed what="run jobs" needs="submit-job" />}
      </div>
      <div class="toolbar">
        <input
          ref={input}
          id="job-search"
          type="search"
          placeholder="Search jobs by ID or name ( / )"
          value={text}
          onInput={(e) => setText((e.target as HTMLInputElement).value)}
        />
        <label>
          Namespace{' '}
          <select
            id="namespace-filter"
            value={namespace}
            onChange={(e) => go({ namespace: (e.target as HTMLSelectElement).value === '*' ? '' : (e.target as HTMLSelectElement).value, next: '', prev: '' })}
          >
            <option value="*">all</option>
            {namespaces.map((n) => <option value={n}>{n}</option>)}
          </select>
        </label>
      </div>
      <ErrorBox error={live.error} />
      {!live.data && !live.error ? <Loading what="jobs" /> : null}
      {live.data ? (
        live.data.length === 0 && !search ? <NoJobs /> : <JobsTable jobs={live.data} />
      ) : null}
      <div class="pager">
        <button disabled={prev.length === 0 && !token} onClick={() => {
          const back = prev.slice(0, -1);
          const before = prev[prev.length - 1] ?? '';
          go({ next: before === '_' ? '' : before, prev: back.join(',') });
        }}>← Previous</button>
        <span class="muted">{live.data ? `${live.data.length} shown` : ''}</span>
        <button id="next-page" disabled={!next} onClick={() => go({ next, prev: [...prev, token || '_'].join(',') })}>Next →</button>
      </div>
    </div>
  );
}

/** An empty list: with ACLs on and no token, the list is empty because nothing may be seen. */
function NoJobs() {
  const [aclsOn, setAclsOn] = useState(false);
  useEffect(() => {
    if (getToken()) return;
    // Without a token this answers 403 or 404 when ACLs are on, 400 (ACL support disabled) when off.
    request('v1/acl/token/self').catch((e) => setAclsOn(e instanceof ApiError && (e.status === 403 || e.status === 404)));
  }, []);
  if (aclsOn) {
    return <ErrorBox error={new ApiError(403, 'ACLs are on and no token is set, so no job may be seen')} />;
  }
  return <p class="empty">No jobs yet. <Link to="jobs/run">Run one</Link>.</p>;
}

export function JobsTable({ jobs }: { jobs: JobStub[] }) {
  if (jobs.length === 0) return <p class="empty">No jobs match.</p>;
  return (
    <table class="list" id="jobs-table">
      <thead>
        <tr><th>Name</th><th>Namespace</th><th>Type</th><th>Node pool</th><th>Priority</th><th>Status</th><th>Allocations</th></tr>
      </thead>
      <tbody>
        {jobs.map((job) => (
          <tr key={job.Namespace + '/' + job.ID} data-job={job.ID}>
            <td><Link to={jobPath(job.ID, job.Namespace)}>{job.Name || job.ID}</Link>
              {job.Periodic ? <span class="tag">periodic</span> : null}
              {job.ParameterizedJob ? <span class="tag">parameterized</span> : null}
            </td>
            <td>{job.Namespace}</td>
            <td>{job.Type}</td>
            <td>{job.NodePool ?? ''}</td>
            <td>{job.Priority}</td>
            <td><Status value={job.Stop && job.Status !== 'dead' ? 'stopping' : job.Status} /></td>
            <td><SummaryBar summary={sumSummaries(job.JobSummary?.Summary)} /></td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
