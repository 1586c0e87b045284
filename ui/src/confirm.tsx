// A button that asks once more before it acts (no modal dialog), and shows the action's error.
import { useState } from 'preact/hooks';

export function ActionButton(props: {
  label: string; confirm?: string; run: () => Promise<unknown>; danger?: boolean; id?: string; disabled?: boolean;
}) {
  const [armed, setArmed] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const click = async () => {
    if (props.confirm && !armed) { setArmed(true); return; }
    setArmed(false); setBusy(true); setError('');
    try { await props.run(); } catch (e) { setError((e as Error).message); } finally { setBusy(false); }
  };
  return (
    <span class="action">
      <button id={props.id} class={props.danger ? 'danger' : ''} disabled={busy || props.disabled} onClick={click}
        onBlur={() => setTimeout(() => setArmed(false), 300)}>
        {busy ? '…' : armed ? props.confirm : props.label}
      </button>
      {error ? <span class="inline-error" role="alert">{error}</span> : null}
    </span>
  );
}
