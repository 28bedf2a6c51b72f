#!/usr/bin/env bash
# qwen3-bpfd against llama.cpp on the same model, on this machine, alternated:
# round 1 runs both engines, then round 2, ... so that the shared cores' noise
# falls on both alike. Reports the best and the median round of each figure,
# with the CPU time of each run beside its wall time, and the system and
# steal time that vmstat saw meanwhile (docs/performance.md, issue 26).
#
#   tools/bench/compare-llamacpp.sh --llama-src DIR --model MODEL_DIR [options]
#
#   --llama-src DIR     a llama.cpp source tree (nothing is downloaded); built
#                       into DIR/build-qwen3-compare unless --llama-bin is given
#   --llama-bin DIR     a directory holding llama-bench and llama-quantize
#   --model DIR         a qwen3-bpfd model directory (BF16 safetensors)
#   --rounds N          alternated rounds (default 4)
#   --threads N         threads of both engines (default 2)
#   --prompt N          prompt tokens of the prefill figure (default 64); both
#                       engines' prefill is timed warm (llama-bench warms up
#                       first; qwen3-bpf-bench --prefill runs after its decode)
#   --decode N          decoded tokens of the decode figure (default 32)
#   --work DIR          where the GGUF files go (default /var/tmp/qwen3-compare)
#   --qwen3-bench PATH  qwen3-bpf-bench (default: build/tools/bench/, then PATH)
#   --qwen3-formats L   qwen3-bpfd precisions, comma-separated, each run every round
#                       (default q8; e.g. q8,q4)
#   --no-kernel-driver  qwen3-bpfd's decode by the engine's threads only (default: both
#                       that and the kernel-driven decode the daemon uses, rows "q8" and
#                       "q8 kernel"; the prefill figure is the engine's either way)
#
# The pairs compared: qwen3-bpfd q8 (and q4 with --qwen3-formats q8,q4) against
# llama.cpp Q8_0 and Q4_0 (and BF16 with --bf16). Raw per-round figures go to
# WORK/rounds.jsonl.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
llama_src="" llama_bin="" model="" rounds=4 threads=2 prompt=64 decode=32 work=/var/tmp/qwen3-compare bf16=0
qbench="" kernel_driver=1 qformats=q8
usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
while (($#)); do
  case $1 in
    --llama-src) llama_src=$2; shift 2 ;;
    --llama-bin) llama_bin=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --decode) decode=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --qwen3-bench) qbench=$2; shift 2 ;;
    --qwen3-formats) qformats=$2; shift 2 ;;
    --bf16) bf16=1; shift ;;
    --no-kernel-driver) kernel_driver=0; shift ;;
    -h | --help) usage ;;
    *) echo "compare-llamacpp: unknown argument '$1'" >&2; usage ;;
  esac
done
die() { echo "compare-llamacpp: $*" >&2; exit 1; }
[[ -n $model && -f $model/config.json && -f $model/model.safetensors ]] ||
  die "--model must name a model directory with config.json and model.safetensors (got '${model}')"
[[ -n $llama_src && -d $llama_src/gguf-py ]] || die "--llama-src must name a llama.cpp source tree (no gguf-py under '${llama_src}')"
if [[ -z $qbench ]]; then
  qbench=$root/build/tools/bench/qwen3-bpf-bench
  [[ -x $qbench ]] || qbench=$(command -v qwen3-bpf-bench || true)
fi
[[ -x $qbench ]] || die "no qwen3-bpf-bench (build it: scripts/build.sh qwen3-bpf-bench, or give --qwen3-bench)"
[[ $(id -u) -eq 0 ]] || die "run as root (qwen3-bpf-bench loads BPF programs)"
mkdir -p "$work"

# llama.cpp: the given binaries, or a CPU build of the two tools from the source tree.
if [[ -z $llama_bin ]]; then
  llama_bin=$llama_src/build-qwen3-compare/bin
  if [[ ! -x $llama_bin/llama-bench || ! -x $llama_bin/llama-quantize ]]; then
    echo "== building llama-bench and llama-quantize from $llama_src (once)"
    cmake -S "$llama_src" -B "$llama_src/build-qwen3-compare" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
      -DGGML_NATIVE=ON >/dev/null
    cmake --build "$llama_src/build-qwen3-compare" -j"$(nproc)" --target llama-bench llama-quantize
  fi
fi
for tool in llama-bench llama-quantize; do [[ -x $llama_bin/$tool ]] || die "no $tool in $llama_bin"; done

# The model as GGUF: BF16 as stored, then Q8_0 and Q4_0 (remade when the model is newer).
name=$(basename "$(realpath "$model")")
base=$work/$name-bf16.gguf
if [[ ! -f $base || $model/model.safetensors -nt $base ]]; then
  # the converter runs on Debian's python3, and gguf-py needs numpy and PyYAML
  /usr/bin/python3 -c 'import numpy, yaml' 2>/dev/null ||
    die "/usr/bin/python3 lacks numpy or yaml (gguf-py needs both): apt-get install python3-numpy python3-yaml"
  /usr/bin/python3 "$root/tools/bench/qwen3_to_gguf.py" "$model" "$base" --llama-src "$llama_src"
fi
formats=(Q8_0 Q4_0)
((bf16)) && formats+=(BF16)
declare -A gguf_of=([BF16]=$base)
for f in Q8_0 Q4_0; do
  gguf_of[$f]=$work/$name-${f,,}.gguf
  if [[ ! -f ${gguf_of[$f]} || $base -nt ${gguf_of[$f]} ]]; then
    "$llama_bin/llama-quantize" "$base" "${gguf_of[$f]}" "$f" >"$work/quantize-$f.log" 2>&1 ||
      die "llama-quantize $f failed: $(tail -n 3 "$work/quantize-$f.log")"
  fi
done

# Runs "$@" with vmstat sampling beside it; prints one JSON object:
# wall and CPU seconds of the run, and vmstat's mean sy and st percentages.
measured() {
  local out=$1 wall user sys
  shift
  vmstat -n 1 >"$work/vmstat.txt" &
  local vm=$!
  /usr/bin/time -f '%e %U %S' -o "$work/time.txt" "$@" >"$out" 2>"$work/stderr.txt" ||
    { kill "$vm"; die "$1 failed: $(tail -n 5 "$work/stderr.txt")"; }
  kill "$vm"; wait "$vm" 2>/dev/null || true
  read -r wall user sys <"$work/time.txt"
  awk -v wall="$wall" -v user="$user" -v sys="$sys" '
    $1 ~ /^[0-9]+$/ && NR > 3 { n++; sy += $14; st += $17 }
    END { printf "{\"wall_s\": %s, \"cpu_s\": %.2f, \"vmstat_sy_pct\": %.1f, \"vmstat_st_pct\": %.1f}\n",
                 wall, user + sys, n ? sy / n : 0, n ? st / n : 0 }' "$work/vmstat.txt"
}

echo "== $rounds alternated rounds, $threads threads, prefill of $prompt tokens, decode of $decode tokens"
echo "   $(uptime)"
: >"$work/rounds.jsonl"
for ((r = 1; r <= rounds; r++)); do
  driver_args=()
  ((kernel_driver)) && driver_args=(--driver kernel)
  for qf in ${qformats//,/ }; do
  env_json=$(measured "$work/qwen3.json" "$qbench" --model "$model" --precision "$qf" --weights map --no-reference \
    --json --threads "$threads" --prompt-tokens "$prompt" --decode "$decode" --prefill "$prompt" --rounds 1 \
    "${driver_args[@]}")
  /usr/bin/python3 - "$work/qwen3.json" "$env_json" "$r" "$qf" >>"$work/rounds.jsonl" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
env = json.loads(sys.argv[2])
fmt = sys.argv[4]
print(json.dumps({"round": int(sys.argv[3]), "engine": "qwen3-bpfd", "format": fmt,
                  "decode_ms_per_token": run["decode_ms_per_token"],
                  "decode_cpu_ms_per_token": run.get("decode_cpu_ms_per_token"),
                  # warm, as llama-bench's after its warm-up run; the first pass after
                  # the load (cold caches, first touch of the weights) kept apart
                  "prefill_tokens_per_second": run["prefill_n_tokens_per_second"],
                  "first_prefill_tokens_per_second": run["prefill_tokens_per_second"], **env}))
# The kernel-driven decode (the daemon's default), from the same process.
for d in run.get("drivers", []):
    print(json.dumps({"round": int(sys.argv[3]), "engine": "qwen3-bpfd", "format": fmt + " " + d["driver"],
                      "decode_ms_per_token": d["round_ms_per_token"][0],
                      "decode_cpu_ms_per_token": d["round_cpu_ms_per_token"][0], **env}))
PY
  done
  for f in "${formats[@]}"; do
    env_json=$(measured "$work/llama.json" "$llama_bin/llama-bench" -m "${gguf_of[$f]}" -t "$threads" \
      -p "$prompt" -n "$decode" -r 1 -o json)
    /usr/bin/python3 - "$work/llama.json" "$env_json" "$r" "$f" >>"$work/rounds.jsonl" <<'PY'
import json, sys
tests = json.load(open(sys.argv[1]))
prefill = next(t for t in tests if t["n_prompt"] > 0 and t["n_gen"] == 0)
gen = next(t for t in tests if t["n_gen"] > 0 and t["n_prompt"] == 0)
print(json.dumps({"round": int(sys.argv[3]), "engine": "llama.cpp", "format": sys.argv[4],
                  "decode_ms_per_token": 1000.0 / gen["avg_ts"],
                  "prefill_tokens_per_second": prefill["avg_ts"], **json.loads(sys.argv[2])}))
PY
  done
  echo "   round $r done"
done

/usr/bin/python3 - "$work/rounds.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = sorted({(r["engine"], r["format"]) for r in rows}, key=lambda k: (k[0] != "qwen3-bpfd", k[1]))
def pick(engine, fmt, field):
    return [r[field] for r in rows if r["engine"] == engine and r["format"] == fmt and r.get(field) is not None]
print()
print("| engine | format | decode ms/token best / median | prefill tokens/s best / median | CPU s / wall s per run (median) | vmstat sy % / st % (median) |")
print("|---|---|---|---|---|---|")
for engine, fmt in keys:
    dec, pre = pick(engine, fmt, "decode_ms_per_token"), pick(engine, fmt, "prefill_tokens_per_second")
    cpu, wall = pick(engine, fmt, "cpu_s"), pick(engine, fmt, "wall_s")
    sy, st = pick(engine, fmt, "vmstat_sy_pct"), pick(engine, fmt, "vmstat_st_pct")
    pre_cell = f"{max(pre):.0f} / {statistics.median(pre):.0f}" if pre else "-"
    print(f"| {engine} | {fmt} | {min(dec):.1f} / {statistics.median(dec):.1f} | {pre_cell} "
          f"| {statistics.median(cpu):.1f} / {statistics.median(wall):.1f} | {statistics.median(sy):.0f} / {statistics.median(st):.0f} |")
print()
for prec in sorted({r["format"].split()[0] for r in rows if r["engine"] == "qwen3-bpfd"}, reverse=True):
    q = [r for r in rows if r["engine"] == "qwen3-bpfd" and r["format"].split()[0] == prec]
    best_q_dec = min(r["decode_ms_per_token"] for r in q)  # the faster driver's best round
    best_q_pre = max(r["prefill_tokens_per_second"] for r in q if "prefill_tokens_per_second" in r)
    for engine, fmt in keys:
        if engine != "llama.cpp":
            continue
        d = min(pick(engine, fmt, "decode_ms_per_token"))
        p = max(pick(engine, fmt, "prefill_tokens_per_second"))
        print(f"qwen3-bpfd {prec} against llama.cpp {fmt}, best rounds: decode {best_q_dec / d:.2f}x its time, "
              f"prefill {p / best_q_pre:.1f}x slower")
PY
echo "(raw rounds: $work/rounds.jsonl)"
