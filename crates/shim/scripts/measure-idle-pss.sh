#!/bin/sh
# Memory of idle drover-shim processes, each supervising `sleep 600` in its own cgroup (as root).
#
#   cargo build --release -p drover --bin drover-shim
#   crates/shim/scripts/measure-idle-pss.sh target/release/drover-shim 20
#
# Prints the mean Pss (proportional: shared pages divided among the processes that map them) and
# the mean VmRSS (which counts shared libc pages in full) per shim, then cleans every shim up
# through its socket. Needs python3 for the socket and the JSON.
set -eu
SHIM=$1
N=${2:-1}
BASE=$(mktemp -d /tmp/drover-shim-pss.XXXXXX)
PIDS=""
for i in $(seq 1 "$N"); do
  D=$BASE/$i
  mkdir -p "$D"
  cat > "$D/spec.json" <<SPEC
{"version":1,"task_id":"bench/$i","command":"sleep","args":["600"],"env":[["PATH","/usr/bin:/bin"]],
 "state_dir":"$D/state","logs":{"dir":"$D/logs","task_name":"sleep","max_files":10,"max_file_size_bytes":10485760},
 "cgroup":{"root":"/sys/fs/cgroup","name":"drover-bench/pss-$$.$i"}}
SPEC
  PID=$("$SHIM" "$D/spec.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["identity"]["shim_pid"])')
  PIDS="$PIDS $PID"
done
sleep 2
python3 - $PIDS <<'PY'
import sys
pss = rss = anon = 0
for pid in sys.argv[1:]:
    for line in open(f"/proc/{pid}/smaps_rollup"):
        if line.startswith("Pss:"): pss += int(line.split()[1])
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"): rss += int(line.split()[1])
        if line.startswith("RssAnon:"): anon += int(line.split()[1])
n = len(sys.argv) - 1
print(f"shims={n} mean_pss_kB={pss/n:.0f} mean_vmrss_kB={rss/n:.0f} mean_rss_anon_kB={anon/n:.0f}")
PY
for i in $(seq 1 "$N"); do
  python3 - "$BASE/$i/state/shim.sock" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'{"op":"cleanup"}\n')
s.makefile().readline(); s.close()
PY
done
rm -rf "$BASE"
