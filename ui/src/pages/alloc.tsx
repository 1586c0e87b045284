// One allocation: its tasks and their events, restart (one task or all), stop and signal, the
// task logs (stdout/stderr, followed, filtered, downloadable), the files, and an exec terminal.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { apiRoot, getToken, qs, request, send, useLive } from '../api';
import { Link, jobPath, navigate, type Location } from '../router';
import { ActionButton } from '../confirm';
import { usePermissions, type Permissions } from '../acl';
import { Ago, ErrorBox, Loading, NotAllowed, Section, Status, Tabs, bytes, shortId } from '../widgets';
import { Checks, ResourceCharts } from './alloc-stats';

interface TaskEvent { Type: string; Time: number; DisplayMessage?: string; Details?: Record<string, string> }
interface TaskState { State: string; Failed: boolean; Restarts: number; StartedAt?: string; FinishedAt?: string; Events?: TaskEvent[] }
interface Allocation {
  ID: string; Name: string; Namespace: string; JobID: string; TaskGroup: string; NodeID: string; NodeName: string;
  ClientStatus: string; ClientDescription?: string; DesiredStatus: string; DesiredDescription?: string;
  CreateTime: number; ModifyTime: number; EvalID: string; JobVersion?: number;
  TaskStates?: Record<string, TaskState>;
  Job?: { Version?: number; TaskGroups: { Name: string; Tasks: { Name: string; Driver: string; Lifecycle?: { Hook: string } | null }[] }[] };
  AllocatedResources?: { Tasks?: Record<string, { Cpu?: { CpuShares: number }; Memory?: { MemoryMB: number } }>; Shared?: { Ports?: { Label: string; Value: number; HostIP: string }[] } };
}

export function AllocPage({ id, loc }: { id: string; loc: Location }) {
  const tab = loc.query.get('tab') ?? 'overview';
  const live = useLive<Allocation>(`v1/allocation/${id}`);
  const a = live.data;
  const tasks = useMemo(() => {
    const group = a?.Job?.TaskGroups.find((g) => g.Name === a?.TaskGroup);
    return group ? group.Tasks.map((t) => t.Name) : Object.keys(a?.TaskStates ?? {});
  }, [a?.Job, a?.TaskGroup]);
  const task = loc.query.get('task') ?? tasks[0] ?? '';
  const perms = usePermissions();
  const base = (t: string) => `allocations/${id}${qs({ tab: t === 'overview' ? '' : t, task: loc.query.get('task') ?? '' })}`;
  return (
    <div>
      <div class="page-head">
        <h1>Allocation <span class="mono">{shortId(id)}</span> {a ? <Status value={a.ClientStatus} /> : null}</h1>
        {a && perms ? <AllocActions alloc={a} perms={perms} /> : null}
      </div>
      <ErrorBox error={live.error} />
      {a ? (
        <>
          <dl class="facts">
            <dt>Name</dt><dd>{a.Name}</dd>
            <dt>Job</dt><dd><Link to={jobPath(a.JobID, a.Namespace)}>{a.JobID}</Link> (version {a.Job?.Version ?? a.JobVersion ?? '?'})</dd>
            <dt>Client</dt><dd><Link to={`clients/${a.NodeID}`}>{a.NodeName || shortId(a.NodeID)}</Link></dd>
            <dt>Desired</dt><dd>{a.DesiredStatus}{a.DesiredDescription ? ` (${a.DesiredDescription})` : ''}</dd>
            <dt>Created</dt><dd><Ago ns={a.CreateTime} /></dd>
            {a.AllocatedResources?.Shared?.Ports?.length ? <><dt>Ports</dt><dd>{a.AllocatedResources.Shared.Ports.map((p) => `${p.Label} ${p.HostIP}:${p.Value}`).join(', ')}</dd></> : null}
          </dl>
          <Tabs current={tab} base={base} tabs={[['overview', 'Tasks'], ['logs', 'Logs'], ...(perms?.can('alloc-exec', a.Namespace) ? [['exec', 'Exec'] as [string, string]] : []), ['files', 'Files']]} />
          {tab === 'overview' ? <Tasks alloc={a} tasks={tasks} perms={perms} /> : null}
          {tab === 'logs' ? (perms?.can('read-logs', a.Namespace) === false
            ? <NotAllowed what="read this allocation's logs" needs="read-logs" />
            : <Logs alloc={a} tasks={tasks} task={task} />) : null}
          {tab === 'exec' && perms ? (perms.can('alloc-exec', a.Namespace)
            ? <Exec alloc={a} tasks={tasks} task={task} />
            : <NotAllowed what="exec into this allocation" needs="alloc-exec" />) : null}
          {tab === 'files' ? (perms?.can('read-fs', a.Namespace) === false
            ? <NotAllowed what="browse this allocation's files" needs="read-fs" />
            : <Files alloc={a} path={loc.query.get('path') ?? '/'} />) : null}
        </>
      ) : !live.error ? <Loading what="the allocation" /> : null}
    </div>
  );
}

const SIGNALS = ['SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2', 'SIGTERM', 'SIGKILL'];

function AllocActions({ alloc, perms }: { alloc: Allocation; perms: Permissions }) {
  const [signal, setSignal] = useState('SIGHUP');
  if (!perms.can('alloc-lifecycle', alloc.Namespace)) {
    return <div class="actions"><NotAllowed what="restart, signal or stop this allocation" needs="alloc-lifecycle" /></div>;
  }
  const running = alloc.ClientStatus === 'running' || alloc.ClientStatus === 'pending';
  return (
    <div class="actions">
      <ActionButton id="restart-all" label="Restart all tasks" confirm="Yes, restart all" disabled={!running}
        run={() => send('PUT', `v1/client/allocation/${alloc.ID}/restart`, { AllTasks: true })} />
      <span class="action">
        <select aria-label="signal" value={signal} onChange={(e) => setSignal((e.target as HTMLSelectElement).value)}>
          {SIGNALS.map((s) => <option>{s}</option>)}
        </select>
        <ActionButton label="Signal" disabled={!running} confirm={`Send ${signal}?`}
          run={() => send('PUT', `v1/client/allocation/${alloc.ID}/signal`, { Signal: signal })} />
      </span>
      <ActionButton id="stop-alloc" label="Stop" danger confirm="Yes, stop it" disabled={alloc.DesiredStatus !== 'run'}
        run={() => send('POST', `v1/allocation/${alloc.ID}/stop`)} />
    </div>
  );
}

function Tasks({ alloc, tasks, perms }: { alloc: Allocation; tasks: string[]; perms?: Permissions }) {
  const lifecycle = !!perms && perms.can('alloc-lifecycle', alloc.Namespace);
  const exec = !!perms && perms.can('alloc-exec', alloc.Namespace);
  const all = Object.values(alloc.AllocatedResources?.Tasks ?? {});
  const cpu = all.reduce((n, t) => n + (t.Cpu?.CpuShares ?? 0), 0);
  const memory = all.reduce((n, t) => n + (t.Memory?.MemoryMB ?? 0), 0);
  return (
    <>
      <ResourceCharts allocId={alloc.ID} cpuMhz={cpu} memoryMb={memory} running={alloc.ClientStatus === 'running'} />
      <Checks allocId={alloc.ID} />
      {tasks.map((name) => {
        const state = alloc.TaskStates?.[name];
        const events = [...(state?.Events ?? [])].reverse();
        const res = alloc.AllocatedResources?.Tasks?.[name];
        return (
          <Section title={`Task ${name}`} actions={
            <span class="actions">
              <Status value={state?.State ?? 'pending'} />
              {state?.Restarts ? <span class="muted">{state.Restarts} restarts</span> : null}
              {res ? <span class="muted">{res.Cpu?.CpuShares ?? 0} MHz, {res.Memory?.MemoryMB ?? 0} MiB</span> : null}
              {lifecycle ? <ActionButton label="Restart" confirm={`Restart ${name}?`} disabled={state?.State !== 'running'}
                run={() => send('PUT', `v1/client/allocation/${alloc.ID}/restart`, { TaskName: name })} /> : null}
              <Link to={`allocations/${alloc.ID}?tab=logs&task=${encodeURIComponent(name)}`} class="button">Logs</Link>
              {exec ? <Link to={`allocations/${alloc.ID}?tab=exec&task=${encodeURIComponent(name)}`} class="button">Exec</Link> : null}
            </span>
          }>
            <table class="list events" data-task={name}>
              <thead><tr><th>Time</th><th>Type</th><th>Description</th></tr></thead>
              <tbody>{events.map((e) => (
                <tr><td><Ago ns={e.Time} /></td><td>{e.Type}</td><td>{e.DisplayMessage ?? ''}</td></tr>
              ))}</tbody>
            </table>
          </Section>
        );
      })}
    </>
  );
}

function TaskPicker({ alloc, tasks, task, tab }: { alloc: Allocation; tasks: string[]; task: string; tab: string }) {
  return (
    <label>Task{' '}
      <select id="task-picker" value={task} onChange={(e) => navigate(`allocations/${alloc.ID}${qs({ tab, task: (e.target as HTMLSelectElement).value })}`, true)}>
        {tasks.map((t) => <option value={t}>{t}</option>)}
      </select>
    </label>
  );
}

/** At most this much log text is kept on the page (the rest is in the download). */
const KEEP = 512 * 1024;

function Logs({ alloc, tasks, task }: { alloc: Allocation; tasks: string[]; task: string }) {
  const [stream, setStream] = useState<'stdout' | 'stderr'>('stdout');
  const [follow, setFollow] = useState(true);
  const [filter, setFilter] = useState('');
  const [text, setText] = useState('');
  const [error, setError] = useState('');
  const pre = useRef<HTMLPreElement>(null);

  useEffect(() => {
    setText(''); setError('');
    if (!task) return;
    const controller = new AbortController();
    (async () => {
      try {
        const response = await request(`v1/client/fs/logs/${alloc.ID}${qs({ task, type: stream, origin: 'end', offset: 50000, plain: true, follow })}`, { signal: controller.signal });
        const reader = response.body!.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          if (buffer.length > KEEP) buffer = buffer.slice(buffer.length - KEEP);
          setText(buffer);
        }
      } catch (e) {
        if (!controller.signal.aborted) setError((e as Error).message);
      }
    })();
    return () => controller.abort();
  }, [alloc.ID, task, stream, follow]);

  const shown = useMemo(() => {
    if (!filter) return text;
    const needle = filter.toLowerCase();
    return text.split('\n').filter((line) => line.toLowerCase().includes(needle)).join('\n');
  }, [text, filter]);

  useEffect(() => {
    if (follow && pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [shown, follow]);

  const download = async () => {
    try {
      const response = await request(`v1/client/fs/logs/${alloc.ID}${qs({ task, type: stream, origin: 'start', offset: 0, plain: true })}`);
      const blob = await response.blob();
      const link = document.createElement('a');
      link.href = URL.createObjectURL(blob);
      link.download = `${alloc.ID.slice(0, 8)}-${task}.${stream}.log`;
      link.click();
      setTimeout(() => URL.revokeObjectURL(link.href), 10000);
    } catch (e) { setError((e as Error).message); }
  };

  return (
    <div>
      <div class="toolbar">
        <TaskPicker alloc={alloc} tasks={tasks} task={task} tab="logs" />
        <span class="segmented">
          <button id="stdout" class={stream === 'stdout' ? 'active' : ''} onClick={() => setStream('stdout')}>stdout</button>
          <button id="stderr" class={stream === 'stderr' ? 'active' : ''} onClick={() => setStream('stderr')}>stderr</button>
        </span>
        <label><input type="checkbox" id="follow" checked={follow} onChange={(e) => setFollow((e.target as HTMLInputElement).checked)} /> follow</label>
        <input type="search" id="log-filter" placeholder="Filter lines" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
        <button id="download-log" onClick={download}>Download</button>
      </div>
      {error ? <div class="error" role="alert">{error}</div> : null}
      <pre class="code logs" id="log-output" ref={pre}>{shown}</pre>
    </div>
  );
}

function Exec({ alloc, tasks, task }: { alloc: Allocation; tasks: string[]; task: string }) {
  const [command, setCommand] = useState('/bin/sh');
  const [session, setSession] = useState(0);
  const [status, setStatus] = useState('');
  const holder = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!session || !holder.current) return;
    let handle: { close(): void } | undefined;
    let cancelled = false;
    setStatus('connecting');
    import('../terminal').then(({ openTerminal }) => {
      if (cancelled || !holder.current) return;
      const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
      const argv = command.trim().split(/\s+/);
      const target = `${scheme}//${location.host}${apiRoot}v1/client/allocation/${alloc.ID}/exec${qs({ task, command: JSON.stringify(argv), tty: true, ws_handshake: true })}`;
      handle = openTerminal(holder.current, target, getToken(), setStatus);
    });
    return () => { cancelled = true; handle?.close(); };
  }, [session]);
  const running = alloc.TaskStates?.[task]?.State === 'running';
  return (
    <div>
      <div class="toolbar">
        <TaskPicker alloc={alloc} tasks={tasks} task={task} tab="exec" />
        <input id="exec-command" value={command} onInput={(e) => setCommand((e.target as HTMLInputElement).value)} aria-label="command" />
        <button id="exec-open" class="primary" disabled={!running} onClick={() => setSession(session + 1)}>{session ? 'Reconnect' : 'Open terminal'}</button>
        <span class="muted" id="exec-status">{running ? status : 'the task is not running'}</span>
      </div>
      <div id="terminal" class="terminal" ref={holder} key={session} />
    </div>
  );
}

interface FileInfo { Name: string; IsDir: boolean; Size: number; FileMode: string; ModTime: string }

function Files({ alloc, path }: { alloc: Allocation; path: string }) {
  const [list, setList] = useState<FileInfo[] | null>(null);
  const [content, setContent] = useState<string | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    setError(''); setList(null); setContent(null);
    request(`v1/client/fs/ls/${alloc.ID}${qs({ path })}`)
      .then((r) => r.json()).then(setList)
      .catch(() => request(`v1/client/fs/cat/${alloc.ID}${qs({ path })}`)
        .then((r) => r.text()).then((t) => setContent(t.length > KEEP ? t.slice(0, KEEP) + '\n…' : t))
        .catch((e) => setError(e.message)));
  }, [alloc.ID, path]);
  const parts = path.split('/').filter(Boolean);
  const to = (p: string) => `allocations/${alloc.ID}${qs({ tab: 'files', path: p })}`;
  return (
    <div>
      <nav class="crumbs"><Link to={to('/')}>alloc</Link>{parts.map((p, i) => <> / <Link to={to('/' + parts.slice(0, i + 1).join('/'))}>{p}</Link></>)}</nav>
      {error ? <div class="error">{error}</div> : null}
      {content !== null ? <pre class="code">{content}</pre> : null}
      {list ? (
        <table class="list" id="files">
          <thead><tr><th>Name</th><th>Size</th><th>Mode</th><th>Modified</th></tr></thead>
          <tbody>{[...list].sort((a, b) => Number(b.IsDir) - Number(a.IsDir) || a.Name.localeCompare(b.Name)).map((f) => (
            <tr><td><Link to={to((path.endsWith('/') ? path : path + '/') + f.Name)}>{f.Name}{f.IsDir ? '/' : ''}</Link></td>
              <td>{f.IsDir ? '' : bytes(f.Size)}</td><td class="mono">{f.FileMode}</td><td><Ago iso={f.ModTime} /></td></tr>
          ))}</tbody>
        </table>
      ) : null}
      {!list && content === null && !error ? <Loading /> : null}
    </div>
  );
}
