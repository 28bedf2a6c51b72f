#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine, as root: install dependencies,
# build, install, make sure a model is there (the shipped trained model when none
# is configured), start qwen3-bpfd (through systemd when systemd runs, directly
# otherwise) and generate a prompt through it, in the kernel.
#
#   QWEN3_MODEL=/path/to/Qwen3-0.6B  use that model directory instead
#   QWEN3_PROMPT="..."               the prompt to generate from
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/.." && pwd)
# Its own build directory, without the tests (scripts/run-tests.sh builds those into ./build).
build_dir=${QWEN3_BUILD_DIR:-$root_dir/build-install}
prefix=${QWEN3_PREFIX:-/usr/local}
state_dir=/var/lib/qwen3-bpfd
default_model=$state_dir/models/default
conf=/etc/qwen3-bpfd/qwen3-bpfd.conf
prompt=${QWEN3_PROMPT:-"The BPF verifier"}
socket=/run/qwen3-bpfd/qwen3-bpfd.sock

say() { printf '\n== %s\n' "$*"; }

if [[ $(id -u) -ne 0 ]]; then
  echo "quickstart: run as root (qwen3-bpfd loads BPF programs)" >&2
  exit 2
fi

say "installing dependencies"
"$root_dir/scripts/setup-deps.sh" --build  # the tests' tools come with run-tests.sh

say "building the daemon, the CLI and the tools it installs (into $build_dir)"
QWEN3_PREFIX=$prefix QWEN3_BUILD_DIR=$build_dir QWEN3_BUILD_TESTING=OFF "$root_dir/scripts/build.sh" installed

say "installing into $prefix"
cmake --install "$build_dir" >/dev/null
export PATH=$prefix/bin:$PATH

if [[ -n ${QWEN3_MODEL:-} ]]; then
  say "using the model at $QWEN3_MODEL"
  sed -i "s|^#\\? *model_dir *=.*|model_dir = $QWEN3_MODEL|" "$conf"
else
  # The shipped trained model, unless another model is there (the rule: scripts/install-default-model.sh).
  "$root_dir/scripts/install-default-model.sh" "$prefix/share/qwen3-bpfd/models" "$default_model"
fi

if [[ -d /run/systemd/system ]]; then
  say "starting qwen3-bpfd through systemd"
  systemd-sysusers >/dev/null 2>&1 || true
  systemd-tmpfiles --create >/dev/null 2>&1 || true
  systemctl daemon-reload
  systemctl enable --now qwen3-bpfd.socket
  systemctl restart qwen3-bpfd.service   # returns once READY=1 (weights loaded)
  systemctl --no-pager status qwen3-bpfd.service | head -5 || true
else
  say "systemd is not PID 1 here: starting qwen3-bpfd directly (log: /var/log/qwen3-bpfd.log)"
  getent group qwen3-bpf >/dev/null || groupadd --system qwen3-bpf
  if [[ -f /run/qwen3-bpfd/qwen3-bpfd.pid ]] && kill -0 "$(cat /run/qwen3-bpfd/qwen3-bpfd.pid)" 2>/dev/null; then
    kill "$(cat /run/qwen3-bpfd/qwen3-bpfd.pid)"; sleep 1
  fi
  mkdir -p /run/qwen3-bpfd
  nohup qwen3-bpfd --foreground >/var/log/qwen3-bpfd.log 2>&1 &
  echo $! >/run/qwen3-bpfd/qwen3-bpfd.pid
  for _ in $(seq 600); do [[ -S $socket ]] && break; sleep 0.1; done
  qwen3-bpf status --wait
fi

say "generating through the daemon (every multiply-accumulate in BPF)"
echo "prompt: $prompt"
# No sampling flags: the model's generation_config.json gives them all (docs/api.md, "Sampling
# defaults"); --stats prints the ones used.
qwen3-bpf generate --max-tokens 48 --stats "$prompt"
echo
say "status"
qwen3-bpf status
