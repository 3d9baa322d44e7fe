#!/bin/bash
# scripts/demo.sh - `make demo`: a short tour of Warren's sandbox.
set -u
BUILD="${BUILD:-build}"
cd "$(dirname "$0")/.."
W="$PWD/$BUILD/warren"
work="$(mktemp -d /tmp/warren-demo.XXXXXX)"
NAME="demo-$$"
cleanup() {
	"$W" sandbox rm "$NAME" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }

if [ "$(id -u)" != 0 ]; then
	echo "make demo needs root (namespaces, mounts, cgroups)" >&2
	exit 1
fi

step "1. A one-off sandbox: its own root, pid 1, hostname, network"
show "$W" sandbox run -- sh -c 'id; hostname; echo "pid 1 is: $(tr "\0" " " </proc/1/cmdline)"; echo "processes: $(ls -d /proc/[0-9]* | wc -l)"; echo "interfaces: $(ls /sys/class/net 2>/dev/null || awk -F: "NR>2{print \$1}" /proc/net/dev | tr -d " ")"; ls /'

step "2. What root inside may not do (capabilities, no_new_privs, seccomp)"
show "$W" sandbox run -- sh -c 'grep -E "CapEff|NoNewPrivs|Seccomp:" /proc/self/status; mount -t tmpfs x /mnt 2>&1 | head -1; unshare -U true 2>&1 | head -1; touch /usr/bin/x 2>&1 | head -1'

step "3. Limits that hold: memory (64M), pids (32), timeout (1s), disk (8M)"
show "$W" sandbox run --memory 64M -- sh -c 'x=$(head -c 200M /dev/zero | tr "\0" a); echo survived'
echo "   -> exit $? (137 = killed by the memory limit, inside the sandbox only)"
show "$W" sandbox run --pids 32 -- sh -c 'i=0; while [ $i -lt 100 ]; do sleep 5 & i=$((i+1)); done'
echo "   -> exit $? (the shell could not fork past the limit of 32; the host is untouched)"
show "$W" sandbox run --timeout 1s -- sleep 30
echo "   -> exit $? (124 = timed out)"
show "$W" sandbox run --disk 8M -- sh -c 'head -c 32M /dev/zero > /workspace/big; echo "write status $?, $(du -m /workspace/big | cut -f1) MiB written"'

step "4. Layers: build one with --upper, reuse it read-only with --layer"
show "$W" sandbox run --upper "$work/layer" -- sh -c 'mkdir -p /workspace/app && echo "print(\"hello from a layer\")" > /workspace/app/main.py && chown -R 1000:1000 /workspace/app'
echo "on the host, owned by the store range:"; ls -ln "$work/layer/upper/workspace/app"
show "$W" sandbox run --layer "$work/layer" -- sh -c 'ls -l /workspace/app; echo changed > /workspace/app/main.py; cat /workspace/app/main.py'
echo "the layer is unchanged: $(cat "$work/layer/upper/workspace/app/main.py")"

step "5. A long-lived sandbox: create, exec, ls, rm"
show "$W" sandbox create --name "$NAME" --memory 512M
show "$W" sandbox exec "$NAME" -- sh -c 'echo state > /workspace/note; sleep 300 >/dev/null 2>&1 &'
show "$W" sandbox exec "$NAME" --cwd /workspace -- cat note
show "$W" sandbox ls
pid="$("$W" sandbox ls | awk -v n="$NAME" '$1==n {print $3}')"
echo "idle init memory: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
show "$W" sandbox rm "$NAME"
echo "left behind: $(find /sys/fs/cgroup -path "*/warren/$NAME" 2>/dev/null | wc -l) cgroups, $(pgrep -fc 'sleep 300') processes"

step "6. Start-up cost (--json)"
show "$W" sandbox run --json --layer "$work/layer" -- true

step "7. Snapshots: build a C project once, start sessions from it in milliseconds"
export WARREN_HOME="$work/data"
repo="$work/c-hello"
cp -a tests/fixtures/c-hello "$repo"
git -C "$repo" init -q -b main
git -C "$repo" -c user.email=demo@warren -c user.name=demo add -A
git -C "$repo" -c user.email=demo@warren -c user.name=demo commit -q -m "initial"
echo "(its .devcontainer/devcontainer.json: onCreateCommand ./configure, updateContentCommand make, postCreateCommand make test)"
show "$W" snapshot build "$repo"
id="$("$W" snapshot list | awk 'NR==2 {print $1}')"
show "$W" snapshot show "$id"
show "$W" sandbox run --snapshot "$id" -- ./hello demo
echo "/* one more commit */" >>"$repo/src/greet.c"
git -C "$repo" -c user.email=demo@warren -c user.name=demo commit -q -am "one more commit"
echo "one commit later, a session syncs to it (--ref main) before its command:"
show "$W" sandbox run --json --snapshot "$id" --ref main -- sh -c 'git -c safe.directory="*" log --oneline | head -2'
show "$W" snapshot verify "$id"

printf '\nDone. Benchmarks: make bench. Tests: make check.\n'
