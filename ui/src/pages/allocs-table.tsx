// A table of allocation stubs, shared by the job, client and evaluation pages.
import { Link } from '../router';
import { Ago, Status, shortId } from '../widgets';

export interface AllocStub {
  ID: string; Name: string; JobID: string; Namespace: string; TaskGroup: string; NodeID: string; NodeName?: string;
  ClientStatus: string; DesiredStatus: string; JobVersion?: number; CreateTime?: number; ModifyTime?: number;
  TaskStates?: Record<string, { State: string; Failed: boolean; Restarts: number }>;
}

export function AllocationsTable({ allocs, showJob }: { allocs: AllocStub[]; showJob?: boolean }) {
  if (allocs.length === 0) return <p class="empty">No allocations.</p>;
  const sorted = [...allocs].sort((a, b) => (b.CreateTime ?? 0) - (a.CreateTime ?? 0));
  return (
    <table class="list allocs">
      <thead><tr><th>ID</th><th>Name</th>{showJob ? <th>Job</th> : null}<th>Client</th><th>Version</th><th>Status</th><th>Desired</th><th>Created</th><th>Modified</th></tr></thead>
      <tbody>
        {sorted.map((a) => (
          <tr key={a.ID} data-alloc={a.ID}>
            <td><Link to={`allocations/${a.ID}`} class="mono">{shortId(a.ID)}</Link></td>
            <td>{a.Name}</td>
            {showJob ? <td>{a.JobID}</td> : null}
            <td><Link to={`clients/${a.NodeID}`}>{a.NodeName || shortId(a.NodeID)}</Link></td>
            <td>{a.JobVersion ?? ''}</td>
            <td><Status value={a.ClientStatus} /></td>
            <td>{a.DesiredStatus}</td>
            <td><Ago ns={a.CreateTime} /></td>
            <td><Ago ns={a.ModifyTime} /></td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
