// An allocation's resource charts (CPU and memory over the last minutes, read from
// /v1/client/allocation/<id>/stats every 2 s as Nomad's UI does) and its service checks
// (/v1/client/allocation/<id>/checks).
import { useEffect, useState } from 'preact/hooks';
import { getJSON } from '../api';
import { Section, bytes } from '../widgets';

interface Usage { MemoryStats?: { RSS?: number; Usage?: number }; CpuStats?: { TotalTicks?: number; Percent?: number } }
interface Stats { ResourceUsage?: Usage; Timestamp?: number }

const POINTS = 90;

function useInterval(fn: () => void, ms: number, deps: unknown[]) {
  useEffect(() => {
    fn();
    const timer = setInterval(fn, ms);
    return () => clearInterval(timer);
  }, deps);
}

function Chart({ values, max, label, id }: { values: number[]; max: number; label: string; id: string }) {
  const width = 300, height = 60;
  const top = Math.max(max, ...values, 1);
  const points = values.map((v, i) => `${(i / (POINTS - 1)) * width},${height - (v / top) * height}`).join(' ');
  return (
    <figure class="chart" id={id}>
      <svg viewBox={`0 0 ${width} ${height}`} preserveAspectRatio="none" role="img" aria-label={label}>
        <polyline points={points} fill="none" stroke="currentColor" stroke-width="1.5" vector-effect="non-scaling-stroke" />
      </svg>
      <figcaption>{label}</figcaption>
    </figure>
  );
}

export function ResourceCharts({ allocId, cpuMhz, memoryMb, running }: { allocId: string; cpuMhz: number; memoryMb: number; running: boolean }) {
  const [cpu, setCpu] = useState<number[]>([]);
  const [mem, setMem] = useState<number[]>([]);
  const [error, setError] = useState('');
  useInterval(() => {
    if (!running) return;
    getJSON<Stats>(`v1/client/allocation/${allocId}/stats`)
      .then(({ data }) => {
        setError('');
        const usage = data.ResourceUsage ?? {};
        setCpu((c) => [...c, usage.CpuStats?.TotalTicks ?? 0].slice(-POINTS));
        setMem((m) => [...m, usage.MemoryStats?.RSS || usage.MemoryStats?.Usage || 0].slice(-POINTS));
      })
      .catch((e) => setError(e.message));
  }, 2000, [allocId, running]);
  if (!running) return null;
  const lastCpu = cpu[cpu.length - 1] ?? 0;
  const lastMem = mem[mem.length - 1] ?? 0;
  return (
    <Section title="Resources">
      {error ? <p class="muted">Stats unavailable: {error}</p> : (
        <div class="charts">
          <Chart id="cpu-chart" values={cpu} max={cpuMhz} label={`CPU ${lastCpu.toFixed(0)} / ${cpuMhz} MHz`} />
          <Chart id="memory-chart" values={mem} max={memoryMb * 1024 * 1024} label={`Memory ${bytes(lastMem)} / ${memoryMb} MiB`} />
        </div>
      )}
    </Section>
  );
}

interface CheckResult { ID: string; Check: string; Group: string; Task?: string; Service: string; Status: string; Output?: string; Mode: string; Timestamp: number; StatusCode?: number }

export function Checks({ allocId }: { allocId: string }) {
  const [checks, setChecks] = useState<Record<string, CheckResult> | null>(null);
  useInterval(() => {
    getJSON<Record<string, CheckResult>>(`v1/client/allocation/${allocId}/checks`)
      .then(({ data }) => setChecks(data)).catch(() => setChecks(null));
  }, 5000, [allocId]);
  if (!checks || Object.keys(checks).length === 0) return null;
  return (
    <Section title="Service checks">
      <table class="list" id="checks">
        <thead><tr><th>Service</th><th>Check</th><th>Mode</th><th>Status</th><th>Output</th></tr></thead>
        <tbody>{Object.values(checks).map((c) => (
          <tr><td>{c.Service}</td><td>{c.Check}</td><td>{c.Mode}</td>
            <td><span class={`badge s-${c.Status === 'success' ? 'running' : 'failed'}`}>{c.Status}</span></td>
            <td class="mono">{c.Output ?? ''}</td></tr>
        ))}</tbody>
      </table>
    </Section>
  );
}
