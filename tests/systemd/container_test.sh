#!/usr/bin/env bash
# qwen3-bpfd under a real systemd: boots a minimal Debian bookworm container
# with systemd-nspawn, installs the project into it the way the README does
# (cmake --install --prefix /usr, a generated tiny model as the default model)
# and checks the units: socket activation, Type=notify readiness, STATUS text,
# generation and XDP verification through the socket, reload, stop, access
# control, that the unit's hardening leaves bpf() working, and (controls with
# drop-ins) that each capability and filter entry it keeps is needed.
# Everything loaded in the container is
# loaded into the host kernel, so the test stops the container and checks no
# program of its daemon remains.
#
# With --package it instead builds the Debian package from the build tree
# (scripts/package.sh, lintian) and checks its life cycle in the same
# container: install, start, upgrade over itself, remove, purge
# (package_checks.sh).
#
# usage: container_test.sh --build-dir DIR --model DIR --probe FILE [--harness-only|--package] [--keep] [--hold]
#   --build-dir DIR   configured and built tree to install (cmake --install)
#   --model DIR       model directory installed as /var/lib/qwen3-bpfd/models/default
#   --probe FILE      qwen3-bpf-feature-probe binary (raw bpf() feature checks)
#   --harness-only    only boot the container and check systemd + bpf() there
#   --package         build qwen3-bpfd_*.deb from DIR and test the package (apt install,
#                     upgrade, remove, purge); --model is the model the daemon serves
#   --keep            keep the per-run directory (for debugging)
#   --hold            before stopping the container, wait until WORK/release exists
#                     (debugging: nsenter -t PID -a bash into the running container)
# environment:
#   QWEN3_NSPAWN_CACHE   rootfs cache (default /var/cache/qwen3-bpf/nspawn-rootfs)
#   QWEN3_DEBIAN_MIRROR  debootstrap mirror (default http://deb.debian.org/debian)
set -euo pipefail

build_dir= model_dir= probe= harness_only=0 package_mode=0 keep=0 hold=0
while (($#)); do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --model) model_dir=$2; shift 2 ;;
    --probe) probe=$2; shift 2 ;;
    --harness-only) harness_only=1; shift ;;
    --package) package_mode=1; shift ;;
    --keep) keep=1; shift ;;
    --hold) hold=1; shift ;;
    *) echo "container_test: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

cache_root=${QWEN3_NSPAWN_CACHE:-/var/cache/qwen3-bpf/nspawn-rootfs}
mirror=${QWEN3_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# debootstrap fetches with wget, which knows nothing of apt's proxy setting.
if [[ -z ${http_proxy:-} ]] && command -v apt-config >/dev/null; then
  eval "$(apt-config shell http_proxy Acquire::http::Proxy)"
  [[ -n ${http_proxy:-} ]] && export http_proxy
fi
apt_proxy_opts=()
[[ -n ${http_proxy:-} ]] && apt_proxy_opts=(-o "Acquire::http::Proxy=$http_proxy")
suite=bookworm
cache_version=2   # bump when the way the rootfs is built changes

t0=$SECONDS
say() { printf '[%4ds] %s\n' $((SECONDS - t0)) "$*"; }
die() {
  printf '\nFAIL: %s\n' "$*" >&2
  dump_diagnostics >&2 || true
  exit 1
}

# ---------------------------------------------------------------- preconditions
[[ $(id -u) -eq 0 ]] || die "must run as root (debootstrap, systemd-nspawn, BPF)"
for cmd in debootstrap systemd-nspawn nsenter cmake bpftool flock; do
  command -v "$cmd" >/dev/null || die "'$cmd' is not installed (scripts/setup-deps.sh installs it)"
done
[[ -n $build_dir && -d $build_dir ]] || die "--build-dir must name a build tree"
[[ -n $probe && -x $probe ]] || die "--probe must name the qwen3-bpf-feature-probe binary"
if ((!harness_only)); then
  [[ -n $model_dir && -f $model_dir/config.json ]] || die "--model must name a model directory (config.json missing in '$model_dir')"
fi

work=$(mktemp -d /var/tmp/qwen3-nspawn.XXXXXX)
root=$work/root
machine=qwen3test$$
nspawn_pid=
cpid=
mounted=0

dump_diagnostics() {
  [[ -n $cpid ]] && kill -0 "$cpid" 2>/dev/null || return 0
  echo "---- systemctl status qwen3-bpfd.socket qwen3-bpfd (container)"
  nsenter -t "$cpid" -a systemctl --no-pager status qwen3-bpfd.socket qwen3-bpfd 2>&1 | tail -n 30 || true
  echo "---- journal of qwen3-bpfd (container)"
  nsenter -t "$cpid" -a journalctl --no-pager -n 60 -u qwen3-bpfd -u qwen3-bpfd.socket 2>&1 || true
}

# --hold: keep the container running until WORK/release exists.
hold_here() {
  if ((hold)) && [[ -n $nspawn_pid ]] && kill -0 "$nspawn_pid" 2>/dev/null; then
    echo "holding: container systemd is host pid $cpid; 'touch $work/release' to stop it" >&2
    while [[ ! -e $work/release ]]; do sleep 1; done
  fi
}

stop_container() {
  if [[ -n $nspawn_pid ]] && kill -0 "$nspawn_pid" 2>/dev/null; then
    say "stopping the container"
    # systemd-nspawn turns SIGTERM into an orderly poweroff of the container.
    kill -TERM "$nspawn_pid"
    for _ in $(seq 60); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$nspawn_pid" 2>/dev/null; then
      echo "container did not power off in 30 s; killing systemd-nspawn $nspawn_pid" >&2
      kill -KILL "$nspawn_pid"
      sleep 1
    fi
  fi
  nspawn_pid=
}

cleanup() {
  local rc=$?
  set +e
  hold_here
  stop_container
  ((mounted)) && umount "$root"
  if ((keep)); then
    echo "kept $work"
  else
    rm -rf "$work"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- install tree
# The project as `cmake --install --prefix /usr` lays it out.
stage=$work/stage
if ((!harness_only)); then
  say "installing $build_dir into a staging tree (prefix /usr)"
  DESTDIR=$stage cmake --install "$build_dir" --prefix /usr >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; die "cmake --install failed (build the whole project first: cmake --build $build_dir)"; }
  for f in usr/bin/qwen3-bpfd usr/bin/qwen3-bpf usr/lib/systemd/system/qwen3-bpfd.service \
           usr/lib/systemd/system/qwen3-bpfd.socket usr/lib/sysusers.d/qwen3-bpfd.conf; do
    [[ -e $stage/$f ]] || die "cmake --install did not install /$f (is the target built?)"
  done
fi
if ((package_mode)); then
  say "building the Debian package from $build_dir (scripts/package.sh --lintian)"
  deb=$("$(dirname "$0")/../../scripts/package.sh" --build-dir "$build_dir" --out "$work" --no-build --lintian \
          2>"$work/package.log" | tail -n 1) || { cat "$work/package.log" >&2; die "scripts/package.sh failed"; }
  [[ -f $deb ]] || die "scripts/package.sh printed '$deb', not a file"
  say "    $(basename "$deb"): $(du -h "$deb" | cut -f1); lintian: $(grep -c '^[EW]: ' "$work/package.log" || true) tags (no errors)"
  grep '^[EW]: ' "$work/package.log" | sed 's/^/    /' || true
fi
service_unit=$stage/usr/lib/systemd/system/qwen3-bpfd.service
if ((harness_only)); then
  # Only the configured unit (for its hardening), not the whole project.
  service_unit=$build_dir/systemd/qwen3-bpfd.service
  [[ -f $service_unit ]] || die "$service_unit missing (configure the build tree first)"
fi
mkdir -p "$stage/usr/libexec/qwen3-bpf-test"
install -m 0755 "$probe" "$stage/usr/libexec/qwen3-bpf-test/qwen3-bpf-feature-probe"

# ---------------------------------------------------------------- rootfs packages
# Every shared library the installed binaries use, mapped to its Debian package,
# plus what every Debian system has and the units use (procps: /bin/kill).
declare -A pkgs=([systemd]=1 [systemd-sysv]=1 [dbus]=1 [passwd]=1 [procps]=1)
# The XDP verify pipeline runs clang-19 on libbpf's and the kernel's uapi
# headers and dumps vmlinux.h with bpftool: the daemon's tools, not libraries.
if ((!harness_only)); then
  for p in clang-19 libbpf-dev bpftool linux-libc-dev; do pkgs[$p]=1; done
  # The package's postinst unpacks the shipped model (tar -J); one rootfs
  # serves both tests, so the container can install the .deb offline.
  pkgs[xz-utils]=1
fi
backports=()
declare -A libs=()
while IFS= read -r elf; do
  if ldd "$elf" 2>/dev/null | grep -q 'not found'; then
    die "$elf has unresolved libraries: $(ldd "$elf" | grep 'not found' | tr -s ' \n' ' ')"
  fi
  while IFS= read -r lib; do libs[$lib]=1; done < <(ldd "$elf" 2>/dev/null | awk '/=> \// {print $3}')
done < <(find "$stage/usr" -type f -perm -u+x -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
# One dpkg -S for all paths; with merged /usr a library may be registered
# under /lib or /usr/lib, so ask for both spellings of each.
declare -a queries=()
for lib in "${!libs[@]}"; do
  real=$(readlink -f "$lib")
  for cand in "$lib" "$real"; do
    queries+=("$cand" "${cand/#\/usr\/lib/\/lib}" "${cand/#\/lib/\/usr\/lib}")
  done
done
owners=$(dpkg -S "${queries[@]}" 2>/dev/null || true)
for lib in "${!libs[@]}"; do
  real=$(readlink -f "$lib")
  owner=$(awk -v a="$lib" -v b="$real" -F': ' '
    { n = split($2, paths, ", "); for (i = 1; i <= n; i++) {
        p = paths[i]; sub(/^\/usr/, "", p); x = a; sub(/^\/usr/, "", x); y = b; sub(/^\/usr/, "", y)
        if (p == x || p == y) { split($1, o, ":"); print o[1]; exit } } }' <<<"$owners")
  [[ -n $owner ]] || die "no Debian package owns $lib (needed by the installed binaries)"
  pkgs[$owner]=1
done
for p in "${!pkgs[@]}"; do
  if dpkg-query -W -f='${Version}' "$p" 2>/dev/null | grep -q '~bpo'; then
    backports+=("$p")
    unset "pkgs[$p]"
  fi
done
include=$(printf '%s\n' "${!pkgs[@]}" | sort | paste -sd, -)
bpo=$(printf '%s\n' "${backports[@]}" | sort | paste -sd, -)
key=$(printf 'v%s %s %s include=%s backports=%s\n' "$cache_version" "$suite" "$mirror" "$include" "$bpo" |
      sha256sum | cut -c1-16)
cache=$cache_root/$key
say "rootfs packages: $include${bpo:+ + from $suite-backports: $bpo} (cache key $key)"

# ---------------------------------------------------------------- rootfs (cached)
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9
if [[ ! -f $cache/.complete ]]; then
  say "building the rootfs with debootstrap (about a minute; cached in $cache)"
  rm -rf "$cache"
  mkdir -p "$cache"
  debootstrap --variant=minbase --include="$include" "$suite" "$cache/rootfs" "$mirror" \
    >"$cache/debootstrap.log" 2>&1 || { tail -n 30 "$cache/debootstrap.log" >&2; die "debootstrap failed"; }
  if ((${#backports[@]})); then
    # pkg/suite, not -t: only these come from backports; their dependencies
    # (linux-libc-dev, ...) stay at bookworm's versions, as on the host.
    cat >"$cache/rootfs/etc/apt/sources.list.d/backports.list" <<EOF
deb $mirror $suite-backports main
EOF
    { chroot "$cache/rootfs" apt-get "${apt_proxy_opts[@]}" update -q &&
      DEBIAN_FRONTEND=noninteractive chroot "$cache/rootfs" apt-get "${apt_proxy_opts[@]}" install -y -q --no-install-recommends \
        "${backports[@]/%//$suite-backports}"; } >"$cache/backports.log" 2>&1 ||
      { tail -n 30 "$cache/backports.log" >&2; die "installing ${backports[*]} from $suite-backports failed"; }
  fi
  chroot "$cache/rootfs" apt-get clean >/dev/null 2>&1 || true
  rm -rf "$cache/rootfs/var/lib/apt/lists/"*
  # A container has no consoles to log in on.
  ln -sf /dev/null "$cache/rootfs/etc/systemd/system/getty.target"
  printf '%s\n' "$include" "$bpo" >"$cache/packages"
  touch "$cache/.complete"
else
  say "using the cached rootfs $cache"
fi
touch "$cache"
# Root file systems for other package lists (older builds) not used for two weeks go.
find "$cache_root" -mindepth 1 -maxdepth 1 -type d -mtime +14 ! -path "$cache" -exec rm -rf {} + 2>/dev/null || true
flock -u 9

# ---------------------------------------------------------------- per-run root
# A copy-on-write overlay on the cached rootfs; a plain copy if overlayfs fails.
mkdir -p "$root" "$work/upper" "$work/ovwork"
if mount -t overlay overlay -o "lowerdir=$cache/rootfs,upperdir=$work/upper,workdir=$work/ovwork" "$root" 2>/dev/null; then
  mounted=1
else
  say "overlayfs unavailable, copying the rootfs"
  cp -a "$cache/rootfs/." "$root/"
fi
if ((package_mode)); then
  # Only the model; everything else comes from the package.
  mkdir -p "$root/var/lib/qwen3-bpfd/models"
  cp -a "$model_dir" "$root/var/lib/qwen3-bpfd/models/tiny"
else
  cp -a "$stage/." "$root/"
fi
if ((!harness_only && !package_mode)); then
  mkdir -p "$root/var/lib/qwen3-bpfd/models"
  cp -a "$model_dir" "$root/var/lib/qwen3-bpfd/models/default"
fi

# ---------------------------------------------------------------- boot
say "booting the container ($machine)"
# --capability/--system-call-filter: nspawn's own seccomp filter denies bpf()
# and Landlock inside the container otherwise (the compiler sandbox uses it).
systemd-nspawn -D "$root" --boot --register=no --keep-unit --machine="$machine" \
  --capability=CAP_BPF,CAP_PERFMON,CAP_NET_ADMIN \
  --system-call-filter="bpf landlock_create_ruleset landlock_add_rule landlock_restrict_self" \
  --private-network --link-journal=no --console=passive >"$work/nspawn.log" 2>&1 &
nspawn_pid=$!
for _ in $(seq 200); do
  cpid=$(ps -o pid=,comm= --ppid "$nspawn_pid" 2>/dev/null | awk '$2 == "systemd" {print $1; exit}' || true)
  [[ -n $cpid ]] && break
  kill -0 "$nspawn_pid" 2>/dev/null || { cat "$work/nspawn.log" >&2; die "systemd-nspawn exited while booting"; }
  sleep 0.1
done
[[ -n $cpid ]] || { cat "$work/nspawn.log" >&2; die "no systemd process appeared in the container within 20 s"; }
# Until its manager socket exists, systemctl cannot talk to the container's systemd.
state=
for _ in $(seq 240); do
  state=$(timeout 10 nsenter -t "$cpid" -a systemctl is-system-running --wait 2>/dev/null || true)
  [[ $state == running || $state == degraded ]] && break
  kill -0 "$nspawn_pid" 2>/dev/null || break
  sleep 0.5
done
case $state in
  running) ;;
  degraded) say "container booted degraded; failed units: $(nsenter -t "$cpid" -a systemctl --failed --plain --no-legend | awk '{print $1}' | paste -sd' ')" ;;
  *) cat "$work/nspawn.log" >&2; die "container did not finish booting (state '$state')" ;;
esac
say "container systemd is pid $cpid on the host; boot state $state"

# Helpers: run inside the container, as a transient unit so its limits apply.
in_ct() { nsenter -t "$cpid" -a "$@"; }
run_ct() { in_ct systemd-run --wait --pipe --quiet --collect "$@"; }
unit_prop() { in_ct systemctl show -p "$2" --value "$1"; }
ct_pidns=$(readlink "/proc/$cpid/ns/pid")
# The ids of the BPF programs a host process holds file descriptors for
# (fdinfo; bpftool's pid listing needs a bpftool built with skeletons).
prog_ids_of() {
  local fd
  for fd in /proc/"$1"/fd/*; do
    [[ $(readlink "$fd" 2>/dev/null) == anon_inode:bpf-prog ]] || continue
    awk '/^prog_id:/ {print $2}' "/proc/$1/fdinfo/${fd##*/}" 2>/dev/null
  done
}
# Adds the programs of every qwen3-bpfd of the container to all_prog_ids.
record_progs() {
  local p
  for p in $(pgrep -x qwen3-bpfd || true); do
    [[ $(readlink "/proc/$p/ns/pid" 2>/dev/null) == "$ct_pidns" ]] || continue
    all_prog_ids+=" $(prog_ids_of "$p")"
  done
}

if ((package_mode)); then
  source "$(dirname "$0")/package_checks.sh"
  exit 0
fi

# ---------------------------------------------------------------- harness checks
say "check: a transient unit runs inside the container"
out=$(run_ct -- sh -c 'echo "$$ $(cat /proc/1/comm)"' 2>&1) || die "systemd-run inside the container failed: $out"
[[ $out == *" systemd" ]] || die "unexpected output of the transient unit: $out"

# Arena maps serve only weight_path = arena, and some host kernels refuse them
# to root as well (EPERM seen under lockdown=integrity): the container is then
# not asked for them, and the run says so.
arena_feature=arena_map
if ! host_arena=$("$probe" arena_map 2>&1); then
  say "note: the host kernel refuses BPF arena maps, so the container is not checked for them: $host_arena"
  arena_feature=
fi

say "check: bpf() works in a plain unit of the container"
out=$(run_ct -- /usr/libexec/qwen3-bpf-test/qwen3-bpf-feature-probe array_map syscall_prog_test_run_mmapable_map \
        $arena_feature map_in_map xdp_prog_test_run 2>&1) ||
  die "BPF features fail inside the container (nspawn options?):"$'\n'"$out"

# Runs the feature probe as a oneshot unit made from the service unit: the same
# [Service] settings, with the daemon swapped for the probe and the daemon-only
# lifecycle lines (notify, watchdog, reload, socket dependency) removed.
# $1: unit name, further arguments: extra [Service] lines (a drop-in).
# Prints the probe's "ok/FAIL feature" lines; returns the unit's success.
probe_features="array_map syscall_prog_test_run_mmapable_map $arena_feature map_in_map xdp_prog_test_run landlock"
n_features=$(wc -w <<<"$probe_features")
run_probe_unit() {
  local name=$1; shift
  sed -e '/^Requires=/d; /^After=/d; /^Also=/d; /^WantedBy=/d; /^WatchdogSec=/d; /^ExecReload=/d; /^Restart/d' \
      -e 's|^Type=.*|Type=oneshot|; s|^NotifyAccess=.*||' \
      -e "s|^ExecStart=.*|ExecStart=/usr/libexec/qwen3-bpf-test/qwen3-bpf-feature-probe $probe_features|" \
      "$service_unit" | in_ct tee "/run/systemd/system/$name.service" >/dev/null
  if (($#)); then
    in_ct mkdir -p "/run/systemd/system/$name.service.d"
    printf '[Service]\n%s\n' "$@" | in_ct tee "/run/systemd/system/$name.service.d/control.conf" >/dev/null
  fi
  in_ct systemctl daemon-reload
  local rc=0
  in_ct systemctl start "$name.service" 2>/dev/null || rc=1
  # journald may not have written the unit's lines yet.
  local lines=
  for _ in $(seq 20); do
    in_ct journalctl --sync 2>/dev/null || true
    lines=$(in_ct journalctl --no-pager -o cat -u "$name" | grep -E '^(ok|FAIL) ' || true)
    [[ $(grep -c . <<<"$lines") -ge $(wc -w <<<"$probe_features") ]] && break
    sleep 0.2
  done
  printf '%s\n' "$lines"
  return $rc
}

say "check: the unit's hardening leaves bpf() working (feature probe under the same [Service] settings)"
out=$(run_probe_unit qwen3-bpf-probe) || die "a BPF feature fails under the hardening of qwen3-bpfd.service:"$'\n'"$out"
[[ $(grep -c '^ok ' <<<"$out") -eq $n_features ]] ||
  die "feature probe under the unit's hardening did not report $n_features ok lines:"$'\n'"$out"
say "    $(paste -sd' ' <<<"$out")"

# Controls: the sandbox really applies, and each of these settings is needed.
say "check (control): without bpf (and landlock_*) in SystemCallFilter= every feature fails"
out=$(run_probe_unit qwen3-bpf-probe-nobpf 'SystemCallFilter=' 'SystemCallFilter=@system-service') &&
  die "the probe passed although bpf() is not in SystemCallFilter=:"$'\n'"$out"
[[ $(grep -c '^FAIL .*Operation not permitted' <<<"$out") -eq $n_features ]] || die "unexpected probe result without bpf():"$'\n'"$out"
# (CAP_SYS_ADMIN also grants every BPF permission, so it goes too.)
say "check (control): without CAP_BPF (and CAP_SYS_ADMIN) maps and programs fail"
out=$(run_probe_unit qwen3-bpf-probe-nocapbpf 'CapabilityBoundingSet=~CAP_BPF CAP_SYS_ADMIN') &&
  die "the probe passed without CAP_BPF:"$'\n'"$out"
grep -q '^FAIL array_map:.*Operation not permitted' <<<"$out" || die "unexpected probe result without CAP_BPF:"$'\n'"$out"
say "check (control): without CAP_NET_ADMIN loading XDP programs fails (the verify pipeline needs it)"
out=$(run_probe_unit qwen3-bpf-probe-nonetadmin 'CapabilityBoundingSet=~CAP_NET_ADMIN CAP_SYS_ADMIN') &&
  die "the probe passed without CAP_NET_ADMIN:"$'\n'"$out"
grep -q '^FAIL xdp_prog_test_run:.*Operation not permitted' <<<"$out" || die "unexpected probe result without CAP_NET_ADMIN:"$'\n'"$out"
grep -q '^ok map_in_map' <<<"$out" || die "without CAP_NET_ADMIN more than XDP failed:"$'\n'"$out"

if ((harness_only)); then
  say "harness-only: container, systemd and bpf() work"
  exit 0
fi

# ---------------------------------------------------------------- unit checks
say "check: systemd-analyze verify of the installed units is clean"
out=$(in_ct systemd-analyze verify /usr/lib/systemd/system/qwen3-bpfd.socket /usr/lib/systemd/system/qwen3-bpfd.service 2>&1) ||
  die "systemd-analyze verify failed:"$'\n'"$out"
[[ -z $out ]] || die "systemd-analyze verify printed warnings:"$'\n'"$out"

say "check: sysusers created group qwen3-bpf at boot"
in_ct getent group qwen3-bpf >/dev/null || die "group qwen3-bpf does not exist in the container (sysusers.d entry?)"

say "check: qwen3-bpfd.socket listens; the service is not started yet"
in_ct systemctl start qwen3-bpfd.socket || die "systemctl start qwen3-bpfd.socket failed"
[[ $(unit_prop qwen3-bpfd.socket ActiveState) == active ]] || die "qwen3-bpfd.socket is not active"
[[ $(unit_prop qwen3-bpfd.service ActiveState) == inactive ]] || die "qwen3-bpfd.service started before any connection"
perm=$(in_ct stat -c '%a %U %G %F' /run/qwen3-bpfd/qwen3-bpfd.sock) || die "socket /run/qwen3-bpfd/qwen3-bpfd.sock missing"
[[ $perm == "660 root qwen3-bpf socket" ]] || die "socket has '$perm', want '660 root qwen3-bpf socket'"

say "check: the first connection activates the daemon"
out=$(run_ct -- qwen3-bpf status --wait 2>&1) || die "qwen3-bpf status --wait through the socket failed:"$'\n'"$out"
[[ $(unit_prop qwen3-bpfd.service ActiveState) == active ]] || die "the daemon is not active after the first connection"

say "check: systemctl status shows the STATUS= text"
status_text=$(unit_prop qwen3-bpfd.service StatusText)
[[ -n $status_text ]] || die "the daemon sent no STATUS= text"
unit_status=$(in_ct systemctl --no-pager status qwen3-bpfd.service || true)
grep -qF "Status: \"$status_text\"" <<<"$unit_status" ||
  die "systemctl status does not show the STATUS text '$status_text'"
say "    STATUS: $status_text"

say "check: systemctl stop; systemctl start returns only after READY=1"
in_ct systemctl stop qwen3-bpfd.service || die "systemctl stop qwen3-bpfd failed"
[[ $(unit_prop qwen3-bpfd.service ActiveState) == inactive ]] || die "the daemon is still running after systemctl stop"
[[ $(unit_prop qwen3-bpfd.service Result) == success ]] || die "the daemon stopped with Result=$(unit_prop qwen3-bpfd.service Result)"
in_ct systemctl start qwen3-bpfd.service || die "systemctl start qwen3-bpfd failed"
# No waiting here: a Type=notify start that returned means READY=1 was sent,
# so the model must already be loaded and the health check SERVING.
out=$(run_ct -- qwen3-bpf health 2>&1) || die "health right after systemctl start is not SERVING:"$'\n'"$out"
out=$(run_ct -- qwen3-bpf status --json 2>&1) || die "qwen3-bpf status --json failed:"$'\n'"$out"
grep -q '"load_state": *"ready"' <<<"$out" || die "status right after systemctl start is not READY:"$'\n'"$out"


say "check: bpf() works for the daemon under its hardening (programs loaded, owned by its process)"
main_pid=$(unit_prop qwen3-bpfd.service MainPID)
host_pid=
for p in $(pgrep -x qwen3-bpfd || true); do
  [[ $(readlink "/proc/$p/ns/pid" 2>/dev/null) == "$ct_pidns" ]] || continue
  [[ $(awk '/^NSpid:/ {print $NF}' "/proc/$p/status") == "$main_pid" ]] && host_pid=$p
done
[[ -n $host_pid ]] || die "cannot find the daemon (container pid $main_pid) among the host's processes"
prog_ids=$(prog_ids_of "$host_pid")
[[ -n $prog_ids ]] || die "the daemon (host pid $host_pid) holds no BPF programs"
all_prog_ids=$prog_ids
say "    the daemon holds $(wc -w <<<"$prog_ids") BPF programs in the host kernel"
caps=$(unit_prop qwen3-bpfd.service CapabilityBoundingSet)
say "    CapabilityBoundingSet: $caps"

say "check: generate through the socket"
out=$(run_ct -- qwen3-bpf generate --max-tokens 8 --seed 1 "Hello" 2>&1) || die "qwen3-bpf generate failed:"$'\n'"$out"
[[ -n ${out//[[:space:]]/} ]] || die "qwen3-bpf generate printed no text"
out=$(run_ct -- qwen3-bpf generate --json --max-tokens 4 "Hello" 2>&1) || die "qwen3-bpf generate --json failed:"$'\n'"$out"
grep -q '"completion_tokens": *4' <<<"$out" || die "generate --json did not report 4 completion tokens:"$'\n'"$out"

say "check: the XDP verify pipeline works under the unit's hardening (sandboxed clang, verifier, test runs)"
in_ct mkdir -p /var/tmp/verify
xdp_lib="$(cd "$(dirname "$0")/../lib/xdp" && pwd)"
in_ct tee /var/tmp/verify/drop_arp.c >/dev/null <"$xdp_lib/drop_arp.c"
in_ct tee /var/tmp/verify/fixtures.json >/dev/null <"$xdp_lib/drop_arp.fixtures.json"
in_ct sh -c "sed '13s/.*/\t\treturn XDP_PASS +;/' /var/tmp/verify/drop_arp.c >/var/tmp/verify/broken.c"
out=$(run_ct -- qwen3-bpf verify /var/tmp/verify/drop_arp.c --fixtures /var/tmp/verify/fixtures.json 2>&1) ||
  die "verify of a correct XDP program failed inside the service:"$'\n'"$out"
grep -q "fixtures: 2 of 2 passed" <<<"$out" || die "verify did not run both fixtures:"$'\n'"$out"
set +e
out=$(run_ct -- qwen3-bpf verify /var/tmp/verify/broken.c 2>&1)
rc=$?
set -e
[[ $rc -eq 1 ]] && grep -q "FAIL at stage compile" <<<"$out" && grep -qE "broken\.c:13" <<<"$out" ||
  die "verify of a program with a syntax error (exit $rc) did not report a compile failure at line 13:"$'\n'"$out"
say "    verify: pass with 2 fixtures; compile error reported at line 13"

say "check: access control (group member allowed, others refused with exit 4)"
in_ct useradd --no-create-home --groups qwen3-bpf qwen3member >/dev/null 2>&1 || die "useradd failed in the container"
out=$(run_ct --uid=qwen3member -- qwen3-bpf status 2>&1) || die "a member of group qwen3-bpf cannot use the daemon:"$'\n'"$out"
set +e
out=$(run_ct --uid=nobody -- qwen3-bpf status 2>&1)
rc=$?
set -e
[[ $rc -eq 4 ]] || die "user nobody got exit $rc (want 4, permission denied):"$'\n'"$out"
grep -q 'permission denied' <<<"$out" || die "user nobody did not get a permission-denied message:"$'\n'"$out"

say "check: systemctl reload (SIGHUP) keeps the daemon serving"
in_ct systemctl reload qwen3-bpfd.service || die "systemctl reload qwen3-bpfd failed"
sleep 1
[[ $(unit_prop qwen3-bpfd.service MainPID) == "$main_pid" ]] || die "reload replaced the daemon process"
[[ $(unit_prop qwen3-bpfd.service ActiveState) == active ]] || die "the daemon is not active after reload"
out=$(run_ct -- qwen3-bpf generate --max-tokens 2 "Hi" 2>&1) || die "generate after reload failed:"$'\n'"$out"

say "check: systemctl stop during a generation ends the stream cleanly (CANCELLED, client exit 5)"
in_ct systemd-run --quiet --unit=qwen3-longgen -p StandardOutput=file:/var/tmp/longgen.out \
  -p StandardError=file:/var/tmp/longgen.err -- qwen3-bpf generate --max-tokens 100000 --ignore-eos "Count" ||
  die "cannot start the long generation"
for _ in $(seq 300); do in_ct test -s /var/tmp/longgen.out && break; sleep 0.1; done
in_ct test -s /var/tmp/longgen.out || die "the long generation printed nothing in 30 s"
say "check: systemctl stop is clean, frees the daemon's BPF programs; the socket re-activates it"
in_ct systemctl stop qwen3-bpfd.service || die "systemctl stop qwen3-bpfd failed"
for _ in $(seq 100); do [[ $(unit_prop qwen3-longgen.service ActiveState) == active ]] || break; sleep 0.1; done
gen_status=$(unit_prop qwen3-longgen.service ExecMainStatus)
gen_err=$(in_ct cat /var/tmp/longgen.err)
[[ $gen_status == 5 ]] && grep -q "the daemon cancelled the generation" <<<"$gen_err" ||
  die "the generation cut by systemctl stop ended with status '$gen_status': $gen_err"
in_ct systemctl reset-failed qwen3-longgen.service 2>/dev/null || true
[[ $(unit_prop qwen3-bpfd.service Result) == success ]] || die "stop ended with Result=$(unit_prop qwen3-bpfd.service Result)"
kill -0 "$host_pid" 2>/dev/null && die "the daemon process $host_pid survived systemctl stop"
for id in $prog_ids; do
  bpftool prog show id "$id" >/dev/null 2>&1 && die "BPF program $id of the stopped daemon is still loaded"
done
[[ $(unit_prop qwen3-bpfd.socket ActiveState) == active ]] || die "qwen3-bpfd.socket stopped with the service"
out=$(run_ct -- qwen3-bpf health --wait 2>&1) || die "the socket did not re-activate the daemon:"$'\n'"$out"
[[ $(unit_prop qwen3-bpfd.service ActiveState) == active ]] || die "the daemon is not active after re-activation"
record_progs

# Controls: each capability group of the unit is needed (docs/systemd.md).
# $1: what, further: drop-in lines. Leaves the daemon restarted with them.
restart_with() {
  local what=$1; shift
  in_ct mkdir -p /run/systemd/system/qwen3-bpfd.service.d
  printf '[Service]\n%s\n' "$@" | in_ct tee /run/systemd/system/qwen3-bpfd.service.d/control.conf >/dev/null
  in_ct systemctl daemon-reload
  in_ct systemctl restart qwen3-bpfd.service 2>/dev/null
}
verify_good() { run_ct -- qwen3-bpf verify /var/tmp/verify/drop_arp.c --fixtures /var/tmp/verify/fixtures.json 2>&1; }

say "check (control): without CAP_PERFMON (and CAP_SYS_ADMIN) the model's BPF programs do not load"
restart_with perfmon 'CapabilityBoundingSet=~CAP_PERFMON CAP_SYS_ADMIN' &&
  die "the daemon started without CAP_PERFMON"
in_ct journalctl --sync 2>/dev/null || true
# A rejected program logs its verifier tail (tens of lines) before libbpf's
# "failed to load", and the unit keeps restarting: look further back. The log
# is read whole first: with pipefail, `journalctl | grep -q` fails whenever
# grep stops reading before journalctl has written everything (SIGPIPE).
journal=$(in_ct journalctl --no-pager -o cat -u qwen3-bpfd -n 400)
grep -q "failed to load" <<<"$journal" ||
  die "the daemon without CAP_PERFMON failed for another reason: $(in_ct journalctl --no-pager -o cat -u qwen3-bpfd -n 5)"
in_ct systemctl reset-failed qwen3-bpfd.service 2>/dev/null || true

say "check (control): without CAP_NET_ADMIN generation works but verify cannot load XDP programs"
restart_with netadmin 'CapabilityBoundingSet=~CAP_NET_ADMIN' || die "the daemon did not start without CAP_NET_ADMIN"
run_ct -- qwen3-bpf generate --max-tokens 2 hi >/dev/null 2>&1 || die "generate fails without CAP_NET_ADMIN"
out=$(verify_good) && die "verify passed without CAP_NET_ADMIN:"$'\n'"$out"
grep -q "stage infrastructure" <<<"$out" || die "verify without CAP_NET_ADMIN: unexpected result:"$'\n'"$out"

# The compiler sandbox: namespaces (+ chroot, running as nobody, Landlock on
# top) when the unit allows it, else Landlock alone (uid 0 without any
# capability). With Landlock filtered out, each capability of the namespace
# mode must be present for verify to work at all.
no_landlock='SystemCallFilter=~landlock_create_ruleset landlock_add_rule landlock_restrict_self'
for cap in CAP_SYS_ADMIN CAP_SYS_CHROOT "CAP_SETUID CAP_SETGID"; do
  say "check (control): without $cap (and Landlock) the compiler has no sandbox"
  restart_with "$cap" "CapabilityBoundingSet=~$cap" "$no_landlock" || die "the daemon did not start without $cap"
  out=$(verify_good) && die "verify passed without $cap and Landlock:"$'\n'"$out"
  grep -q "no compiler sandbox" <<<"$out" || die "verify without $cap: unexpected result:"$'\n'"$out"
done
say "check (control): without CAP_SYS_ADMIN but with Landlock, verify falls back to the Landlock sandbox"
restart_with landlock-only 'CapabilityBoundingSet=~CAP_SYS_ADMIN CAP_SYS_CHROOT CAP_SETUID CAP_SETGID CAP_KILL' ||
  die "the daemon did not start with the Landlock-only capability set"
out=$(verify_good) || die "verify fails in the Landlock-only configuration:"$'\n'"$out"
say "check (control): without CAP_KILL root cannot kill the compiler once it runs as nobody (timeouts)"
out=$(run_ct -p "CapabilityBoundingSet=CAP_SETUID CAP_SETGID" -- sh -c \
  'setpriv --reuid=nobody --regid=nogroup --clear-groups sleep 30 & sleep 0.3; kill -KILL $! 2>&1 && echo killed; kill -0 $! 2>/dev/null && setpriv --reuid=nobody --regid=nogroup --clear-groups kill -KILL $!; true')
grep -q "Operation not permitted" <<<"$out" || die "kill of a nobody process without CAP_KILL: $out"
out=$(run_ct -p "CapabilityBoundingSet=CAP_SETUID CAP_SETGID CAP_KILL" -- sh -c \
  'setpriv --reuid=nobody --regid=nogroup --clear-groups sleep 30 & sleep 0.3; kill -KILL $! && echo killed')
[[ $out == killed ]] || die "kill of a nobody process with CAP_KILL: $out"

say "check (control): without RuntimeDirectoryPreserve=yes stopping the service deletes the activation socket"
restart_with preserve 'RuntimeDirectoryPreserve=no' || die "the daemon did not start with RuntimeDirectoryPreserve=no"
in_ct systemctl stop qwen3-bpfd.service
in_ct test -S /run/qwen3-bpfd/qwen3-bpfd.sock && die "the socket survived the stop although the runtime directory is not preserved"
in_ct systemctl restart qwen3-bpfd.socket || die "cannot restart qwen3-bpfd.socket"

say "check: with the unit as installed, verify works again"
in_ct rm -rf /run/systemd/system/qwen3-bpfd.service.d
in_ct systemctl daemon-reload
in_ct systemctl restart qwen3-bpfd.service || die "restart with the installed unit failed"
out=$(verify_good) || die "verify fails after the controls:"$'\n'"$out"
record_progs

say "check: stopping socket and service leaves no qwen3-bpfd process"
in_ct systemctl stop qwen3-bpfd.socket qwen3-bpfd.service || die "systemctl stop of socket and service failed"
for p in $(pgrep -x qwen3-bpfd || true); do
  [[ $(readlink "/proc/$p/ns/pid" 2>/dev/null) == "$ct_pidns" ]] && die "qwen3-bpfd (host pid $p) still runs in the container"
done

# Every program the container's daemons held lives in the host kernel: after
# the container is gone, none may remain.
record_progs
hold_here
stop_container
say "check: no BPF program of the container's daemons remains in the host kernel"
for id in $all_prog_ids; do
  bpftool prog show id "$id" >/dev/null 2>&1 && die "BPF program $id loaded in the container is still in the kernel"
done

say "PASS: qwen3-bpfd works under a real systemd"
