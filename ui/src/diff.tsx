// A job diff (Nomad's `JobDiff` from a plan or from the versions endpoint) as a readable tree:
// `+` added, `-` deleted, `~` edited, nested objects indented.
import type { ComponentChildren } from 'preact';

interface FieldDiff { Type: string; Name: string; Old: string; New: string; Annotations?: string[] }
interface ObjectDiff { Type: string; Name: string; Fields?: FieldDiff[]; Objects?: ObjectDiff[] }
interface TaskDiff extends ObjectDiff { Annotations?: string[] }
interface GroupDiff extends ObjectDiff { Tasks?: TaskDiff[]; Updates?: Record<string, number> }
export interface JobDiff { Type: string; ID: string; Fields?: FieldDiff[]; Objects?: ObjectDiff[]; TaskGroups?: GroupDiff[] }

const mark = (type: string) => (type === 'Added' ? '+' : type === 'Deleted' ? '-' : type === 'Edited' ? '~' : ' ');
const cls = (type: string) => `d-${type.toLowerCase()}`;

function Fields({ fields }: { fields?: FieldDiff[] }) {
  return <>{(fields ?? []).filter((f) => f.Type !== 'None').map((f) => (
    <div class={`dl ${cls(f.Type)}`}>
      {mark(f.Type)} {f.Name}: {f.Type === 'Added' ? JSON.stringify(f.New) : f.Type === 'Deleted' ? JSON.stringify(f.Old)
        : <>{JSON.stringify(f.Old)} → {JSON.stringify(f.New)}</>}
      {f.Annotations?.length ? <span class="tag">{f.Annotations.join(', ')}</span> : null}
    </div>
  ))}</>;
}

function Obj({ o, children }: { o: ObjectDiff; children?: ComponentChildren }) {
  if (o.Type === 'None') return null;
  return (
    <div class="dobj">
      <div class={`dl ${cls(o.Type)}`}>{mark(o.Type)} {o.Name} {'{'}</div>
      <div class="dnest">
        <Fields fields={o.Fields} />
        {(o.Objects ?? []).map((c) => <Obj o={c} />)}
        {children}
      </div>
      <div class="dl">{'}'}</div>
    </div>
  );
}

export function DiffView({ diff }: { diff?: JobDiff | null }) {
  if (!diff || diff.Type === 'None') return <p class="muted">No changes.</p>;
  return (
    <div class="diff">
      <div class={`dl ${cls(diff.Type)}`}>{mark(diff.Type)} Job: {JSON.stringify(diff.ID)}</div>
      <div class="dnest">
        <Fields fields={diff.Fields} />
        {(diff.Objects ?? []).map((o) => <Obj o={o} />)}
        {(diff.TaskGroups ?? []).map((g) => (
          <Obj o={{ ...g, Name: `Task Group: ${JSON.stringify(g.Name)}` }}>
            {g.Updates ? <div class="dl muted">( {Object.entries(g.Updates).map(([k, v]) => `${v} ${k}`).join(', ')} )</div> : null}
            {(g.Tasks ?? []).map((t) => <Obj o={{ ...t, Name: `Task: ${JSON.stringify(t.Name)}${t.Annotations?.length ? ' (' + t.Annotations.join(', ') + ')' : ''}` }} />)}
          </Obj>
        ))}
      </div>
    </div>
  );
}
