// The exec terminal: xterm.js over the exec websocket (`/v1/client/allocation/<id>/exec`), in
// Nomad's protocol: the token in the first message (`ws_handshake`), stdin and the terminal's
// size as JSON frames, stdout/stderr back base64-encoded, then `exited` with the exit code.
// Loaded on demand, so xterm.js costs nothing until a terminal opens.
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';

const encoder = new TextEncoder();

function toBase64(bytes: Uint8Array): string {
  let text = '';
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text);
}

function fromBase64(data: string): Uint8Array {
  const text = atob(data);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

export interface TerminalHandle { close(): void; fit(): void }

export function openTerminal(
  element: HTMLElement,
  socketUrl: string,
  token: string,
  onStatus: (status: string) => void,
): TerminalHandle {
  const dark = matchMedia('(prefers-color-scheme: dark)').matches;
  const term = new Terminal({
    cursorBlink: true,
    fontSize: 13,
    fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace',
    theme: dark ? { background: '#111418', foreground: '#d8dde3' } : { background: '#1d2127', foreground: '#e6e9ed' },
  });
  const fitAddon = new FitAddon();
  term.loadAddon(fitAddon);
  term.open(element);
  fitAddon.fit();
  const socket = new WebSocket(socketUrl);
  const sendSize = () => {
    if (socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify({ tty_size: { height: term.rows, width: term.cols } }));
    }
  };
  socket.onopen = () => {
    socket.send(JSON.stringify({ version: 1, auth_token: token }));
    sendSize();
    onStatus('connected');
    term.focus();
  };
  socket.onmessage = (message) => {
    let frame: any;
    try { frame = JSON.parse(String(message.data)); } catch { return; }
    if (frame.stdout?.data) term.write(fromBase64(frame.stdout.data));
    if (frame.stderr?.data) term.write(fromBase64(frame.stderr.data));
    if (frame.exited) {
      const code = frame.result?.exit_code ?? 0;
      term.write(`\r\n\x1b[2m[the command exited with code ${code}]\x1b[0m\r\n`);
      onStatus(`exited (${code})`);
    }
  };
  let opened = false;
  socket.addEventListener('open', () => { opened = true; });
  socket.onclose = (event) => {
    if (!opened) {
      // The upgrade itself was refused (the browser is not told why).
      term.write('\x1b[31mthe agent refused the terminal\x1b[0m\r\n');
      onStatus('refused');
      return;
    }
    if (event.code !== 1000 && event.reason) term.write(`\r\n\x1b[31m${event.reason}\x1b[0m\r\n`);
    onStatus('closed');
  };
  term.onData((data) => {
    if (socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify({ stdin: { data: toBase64(encoder.encode(data)) } }));
    }
  });
  term.onResize(sendSize);
  const onWindowResize = () => fitAddon.fit();
  window.addEventListener('resize', onWindowResize);
  return {
    close() {
      window.removeEventListener('resize', onWindowResize);
      if (socket.readyState <= WebSocket.OPEN) socket.close(1000);
      term.dispose();
    },
    fit() { fitAddon.fit(); },
  };
}
