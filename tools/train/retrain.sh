#!/usr/bin/env bash
# Retrains the shipped model (model/qwen3-kerneldoc.tar.xz) from Debian's linux-source-6.1 and
# packs it, with the held-out check file the accuracy tests read. The shipped model is a warm
# start: the run continues from the model of commit $QWEN3_INIT_COMMIT (taken from git history,
# so the run repeats whatever the working tree ships) on the current corpus; about an hour on one
# core. Interrupted runs resume from the checkpoint in the work folder. Tokenizes with a build's
# qwen3-bpf when there is one, else with tools/train/tokenize.js (node and the
# @lenml/tokenizers of scripts/setup-deps.sh). Extra arguments go to make_model.py.
#
#   QWEN3_TRAIN_WORK=/var/tmp/qwen3-train   the work folder (corpus, checkpoint, export)
#   QWEN3_INIT_COMMIT=459465e               the commit whose model is the warm start; empty:
#                                           train from random weights (make_model.py's defaults)
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/../.." && pwd)
work=${QWEN3_TRAIN_WORK:-/var/tmp/qwen3-train}
cli=${QWEN3_BUILD_DIR:-$root_dir/build}/client/qwen3-bpf
init_commit=${QWEN3_INIT_COMMIT-459465e}
name=qwen3-kerneldoc

need=()
for p in python3-torch python3-numpy libopenblas0-pthread linux-source-6.1 xz-utils; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if (( ${#need[@]} )); then
  # Without libopenblas0-pthread torch falls back to the reference BLAS, about 10x slower.
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi
if [[ -x $cli ]]; then
  tokenizer=(--cli "$cli")
elif [[ -d $root_dir/third_party/js-tokenizer/node_modules/@lenml/tokenizers ]] && command -v node >/dev/null; then
  tokenizer=(--js-dir "$root_dir/third_party/js-tokenizer")
else
  echo "retrain: neither $cli nor node with third_party/js-tokenizer: run ./scripts/build.sh first" >&2
  exit 2
fi

# The shipped continued run (sized for the fraction of a core it got): re-warmed to 0.3x the first
# run's peak LR, batch 16,
# linear decay over the last 60%.
warm=()
if [[ -n $init_commit ]]; then
  mkdir -p "$work/init"
  if [[ ! -f $work/init/$init_commit/$name/model.safetensors ]]; then
    mkdir -p "$work/init/$init_commit"
    git -C "$root_dir" show "$init_commit:model/$name.tar.xz" | xz -dc | tar -C "$work/init/$init_commit" -xf -
  fi
  warm=(--init-from "$work/init/$init_commit/$name" --steps 150 --batch 16 --lr 6e-4 --warmup 50
        --decay-fraction 0.6 --full-softmax-steps 12)
fi

nice -n 10 /usr/bin/python3 "$root_dir/tools/train/make_model.py" --work "$work" --out "$work/$name" \
  --tokenizer "$root_dir/third_party/qwen3-tokenizer" "${tokenizer[@]}" "${warm[@]}" "$@"

# A reproducible archive: fixed order, owner and times; xz -9e is what keeps it under 40 MB.
tar -C "$work" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - "$name" |
  xz -9e -T1 >"$root_dir/model/$name.tar.xz.new"
mv "$root_dir/model/$name.tar.xz.new" "$root_dir/model/$name.tar.xz"
cp "$work/heldout_check.json" "$root_dir/tests/engine/trained_heldout.json"
du -h "$root_dir/model/$name.tar.xz"
echo "retrain: wrote model/$name.tar.xz and tests/engine/trained_heldout.json; update model/MODEL_CARD.md from $work/$name/training_report.json"
