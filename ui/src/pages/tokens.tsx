// Sign in with an ACL token: kept in this browser's localStorage and sent as X-Nomad-Token.
// The token is checked with /v1/acl/token/self before it is kept.
import { useState } from 'preact/hooks';
import { getJSON, getToken, setToken } from '../api';
import { navigate } from '../router';

interface TokenSelf { AccessorID: string; Name: string; Type: string; Policies?: string[]; ExpirationTime?: string | null }

export function TokensPage() {
  const [secret, setSecret] = useState('');
  const [error, setError] = useState('');
  const [self, setSelf] = useState<TokenSelf | null>(null);
  const current = getToken();
  const signIn = async (event: Event) => {
    event.preventDefault();
    setError('');
    setToken(secret.trim());
    try {
      const { data } = await getJSON<TokenSelf>('v1/acl/token/self');
      setSelf(data);
      navigate('jobs');
    } catch (e) {
      setToken(current);
      setError(`That token was refused: ${(e as Error).message}`);
    }
  };
  const check = async () => {
    try { setSelf((await getJSON<TokenSelf>('v1/acl/token/self')).data); } catch (e) { setError((e as Error).message); }
  };
  return (
    <div class="narrow">
      <h1>ACL token</h1>
      <p class="muted">With ACLs on, the UI shows what your token may read and do. The token stays in this browser (localStorage) and goes to the agent as <code>X-Nomad-Token</code>.</p>
      {current ? (
        <div class="panel">
          <p>A token is set{self ? <>: <strong>{self.Name || self.AccessorID}</strong> ({self.Type}; policies {(self.Policies ?? []).join(', ') || 'none'})</> : '.'}</p>
          <button onClick={check}>Show who it is</button>{' '}
          <button id="sign-out" class="danger" onClick={() => { setToken(''); setSelf(null); }}>Sign out</button>
        </div>
      ) : null}
      <form onSubmit={signIn} class="panel">
        <label class="block">Secret ID
          <input id="token-secret" type="password" autocomplete="off" value={secret} onInput={(e) => setSecret((e.target as HTMLInputElement).value)} />
        </label>
        <button id="sign-in" class="primary" type="submit" disabled={!secret.trim()}>Sign in</button>
      </form>
      {error ? <div class="error" role="alert">{error}</div> : null}
    </div>
  );
}
