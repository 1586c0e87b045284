// What the signed-in token may do, as Nomad's UI works it out: `/v1/acl/token/self`, then each
// of its policies' `RulesJSON` (the rules parsed, coarse policies expanded into capabilities).
// Actions the token may not take are hidden, with a note that says which capability they need.
// With ACLs off (the agent answers 400) or a management token, everything is allowed.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, getJSON } from './api';

interface VariablesPathRule { PathSpec: string; Capabilities?: string[] | null }
interface NamespaceRule { Name: string; Capabilities?: string[] | null; Variables?: { Paths?: VariablesPathRule[] | null } | null }
interface RulesJSON { Namespaces?: NamespaceRule[] | null; Node?: { Policy: string } | null }

export interface Permissions {
  /** Whether the token may use `capability` (e.g. "submit-job") in `namespace`. */
  can(capability: string, namespace: string): boolean;
  /** Whether the token may do `operation` (a variables capability: "read", "write",
   * "destroy", "list") on the variable at `path` in `namespace`. */
  canVariable(operation: string, namespace: string, path: string): boolean;
  /** Whether the token may change nodes (drain, eligibility, metadata): node write. */
  nodeWrite: boolean;
}

const everything: Permissions = { can: () => true, canVariable: () => true, nodeWrite: true };
const nothing: Permissions = { can: () => false, canVariable: () => false, nodeWrite: false };

/** Nomad's glob: `*` matches any run of characters. */
function globMatches(pattern: string, name: string): boolean {
  const re = new RegExp('^' + pattern.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$');
  return re.test(name);
}

/** The rules that apply to `name`: those naming it exactly, else those of the closest
 * matching glob (the most literal characters), as Nomad's ACL picks a namespace's rules and,
 * within them, a variable path's. */
function closest<T>(rules: T[], keyOf: (rule: T) => string, name: string): T[] {
  const exact = rules.filter((r) => keyOf(r) === name);
  if (exact.length) return exact;
  const globs = rules.filter((r) => keyOf(r).includes('*') && globMatches(keyOf(r), name));
  if (!globs.length) return [];
  const literal = (r: T) => keyOf(r).replace(/\*/g, '').length;
  const best = Math.max(...globs.map(literal));
  return globs.filter((r) => literal(r) === best);
}

const rulesFor = (rules: NamespaceRule[], namespace: string) => closest(rules, (r) => r.Name, namespace);

export function permissionsOf(policies: RulesJSON[]): Permissions {
  const namespaces = policies.flatMap((p) => p.Namespaces ?? []);
  const nodePolicies = policies.map((p) => p.Node?.Policy).filter((p): p is string => !!p);
  return {
    can(capability, namespace) {
      const caps = new Set(rulesFor(namespaces, namespace).flatMap((r) => r.Capabilities ?? []));
      return !caps.has('deny') && caps.has(capability);
    },
    canVariable(operation, namespace, path) {
      // As the agent decides it: the namespace's rules, then the path's (exact or closest
      // glob); without a path rule, a coarse write (submit-job) allows everything and a coarse
      // read (read-job) allows read and list.
      const rules = rulesFor(namespaces, namespace);
      const caps = new Set(rules.flatMap((r) => r.Capabilities ?? []));
      if (!rules.length || caps.has('deny')) return false;
      const paths = closest(rules.flatMap((r) => r.Variables?.Paths ?? []), (p) => p.PathSpec, path);
      if (paths.length) {
        const pathCaps = new Set(paths.flatMap((p) => p.Capabilities ?? []));
        return !pathCaps.has('deny') && pathCaps.has(operation);
      }
      const write = caps.has('submit-job');
      return operation === 'read' || operation === 'list' ? write || caps.has('read-job') : write;
    },
    nodeWrite: !nodePolicies.includes('deny') && nodePolicies.includes('write'),
  };
}

async function load(): Promise<Permissions> {
  let token: { Type: string; Policies?: string[] | null; Roles?: { ID: string }[] | null };
  try {
    token = (await getJSON<typeof token>('v1/acl/token/self')).data;
  } catch (error) {
    // ACLs off: Nomad answers 400 ("ACL support disabled").
    if (error instanceof ApiError && error.status === 400) return everything;
    // No token (or a refused one): what the anonymous policy allows.
    if (error instanceof ApiError && error.status === 403) {
      const anonymous = await getJSON<{ RulesJSON?: RulesJSON }>('v1/acl/policy/anonymous').catch(() => null);
      return anonymous?.data.RulesJSON ? permissionsOf([anonymous.data.RulesJSON]) : nothing;
    }
    throw error;
  }
  if (token.Type === 'management') return everything;
  const names = new Set(token.Policies ?? []);
  for (const role of token.Roles ?? []) {
    const reply = await getJSON<{ Policies?: { Name: string }[] }>(`v1/acl/role/${encodeURIComponent(role.ID)}`).catch(() => null);
    for (const p of reply?.data.Policies ?? []) names.add(p.Name);
  }
  const policies = await Promise.all([...names].map((name) =>
    getJSON<{ RulesJSON?: RulesJSON }>(`v1/acl/policy/${encodeURIComponent(name)}`)
      .then((r) => r.data.RulesJSON ?? {}).catch(() => ({}))));
  return permissionsOf(policies);
}

let cached: Promise<Permissions> | null = null;
window.addEventListener('drover-token', () => { cached = null; });

/** The token's permissions; `undefined` while they load (actions stay hidden until then). */
export function usePermissions(): Permissions | undefined {
  const [perms, setPerms] = useState<Permissions | undefined>(undefined);
  const [epoch, setEpoch] = useState(0);
  useEffect(() => {
    const bump = () => setEpoch((n) => n + 1);
    window.addEventListener('drover-token', bump);
    return () => window.removeEventListener('drover-token', bump);
  }, []);
  useEffect(() => {
    let gone = false;
    if (!cached) cached = load();
    const mine = cached;
    mine.then((p) => { if (!gone) setPerms(p); })
      .catch(() => { if (cached === mine) cached = null; if (!gone) setPerms(nothing); });
    return () => { gone = true; };
  }, [epoch]);
  return perms;
}
