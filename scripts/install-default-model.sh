#!/bin/sh
# Installs the shipped trained model (model/MODEL_CARD.md) as the daemon's
# default model, when the rule allows it. Used by scripts/quickstart.sh and by
# the Debian package's postinst, so both follow one rule:
#   installed: when there is no model, when a random model (qwen3-bpf-mkmodel,
#              "qwen3_bpf_generated") is there, or an older shipped one (its card
#              is there, its SHIPPED_SHA256 stamp differs);
#   untouched: any other model directory someone put there.
#
# usage: install-default-model.sh SHARED_MODELS_DIR DEFAULT_MODEL_DIR
#   SHARED_MODELS_DIR  holds qwen3-kerneldoc.tar.xz and MODEL_CARD.md
#                      (<prefix>/share/qwen3-bpfd/models)
#   DEFAULT_MODEL_DIR  e.g. /var/lib/qwen3-bpfd/models/default
# Prints one line when it installs the model; exit 0 also when it leaves it.
set -eu

if [ $# -ne 2 ]; then
  echo "usage: install-default-model.sh SHARED_MODELS_DIR DEFAULT_MODEL_DIR" >&2
  exit 2
fi
shared=$1
target=$2
tarball=$shared/qwen3-kerneldoc.tar.xz
card=$shared/MODEL_CARD.md
for f in "$tarball" "$card"; do
  [ -f "$f" ] || { echo "install-default-model: $f is missing (is the project installed?)" >&2; exit 1; }
done
shipped_sum=$(sha256sum "$tarball" | cut -d' ' -f1)

replace=0
if [ ! -f "$target/config.json" ] || grep -q '"qwen3_bpf_generated"' "$target/config.json"; then
  replace=1
elif grep -qs '^# qwen3-kerneldoc' "$target/MODEL_CARD.md" &&
     [ "$(cat "$target/SHIPPED_SHA256" 2>/dev/null || true)" != "$shipped_sum" ]; then
  replace=1
fi
[ $replace -eq 1 ] || exit 0

echo "installing the default model (Qwen3 architecture, trained on kernel documentation) in $target"
mkdir -p "$(dirname "$target")"
rm -rf "$target.new"
mkdir "$target.new"
tar -xJf "$tarball" -C "$target.new" --strip-components=1 --no-same-owner
cp "$card" "$target.new/"
echo "$shipped_sum" >"$target.new/SHIPPED_SHA256"
rm -rf "$target"
mv "$target.new" "$target"
