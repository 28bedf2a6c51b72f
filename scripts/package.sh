#!/usr/bin/env bash
# Builds the Debian package qwen3-bpfd_<version>_amd64.deb from a checkout:
# what `cmake --install --prefix /usr` installs (daemon, CLI, tools, units,
# sysusers/tmpfiles, config, shipped model, proto, tokenizer), plus the docs,
# man pages (help2man), the maintainer scripts of packaging/debian and a
# Depends line from dpkg-shlibdeps and the verify service's tools.
#
# usage: package.sh [--build-dir DIR] [--out DIR] [--no-build] [--lintian]
#   --build-dir DIR  build tree (default: build/ of the checkout; configured if absent)
#   --out DIR        where the .deb goes (default: the build tree)
#   --no-build       do not build; the installable targets must be built already
#   --lintian        run lintian on the result; exit 1 on any error tag
# Prints the path of the .deb as its last line. Compressed with gzip: most of
# it is the already-xz model tarball, and xz would take a minute more for 10%.
set -euo pipefail

root_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$root_dir/build out_dir= do_build=1 do_lintian=0
while (($#)); do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --out) out_dir=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --lintian) do_lintian=1; shift ;;
    *) echo "package: unknown argument '$1' (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done
out_dir=${out_dir:-$build_dir}
pkg_dir=$root_dir/packaging/debian
die() { echo "package: $*" >&2; exit 1; }
for cmd in cmake dpkg-deb dpkg-shlibdeps help2man strip; do
  command -v "$cmd" >/dev/null || die "'$cmd' is not installed (scripts/setup-deps.sh installs it)"
done

# `installed`: every program install(TARGETS) names (CMakeLists.txt, qwen3_install_program).
if ((do_build)); then
  if [[ ! -f $build_dir/CMakeCache.txt ]]; then
    cmake -S "$root_dir" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  cmake --build "$build_dir" --target installed
fi
[[ -f $build_dir/CMakeCache.txt ]] || die "$build_dir is not a configured build tree"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build_dir/CMakeCache.txt")
[[ -n $version ]] || die "no CMAKE_PROJECT_VERSION in $build_dir/CMakeCache.txt"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# dpkg-shlibdeps looks for the binaries in debian/<package>/.
stage=$work/debian/qwen3-bpfd
DESTDIR=$stage cmake --install "$build_dir" --prefix /usr >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; die "cmake --install failed (is the 'installed' target built?)"; }

# dpkg keeps the administrator's edits of a conffile: no .default copy needed.
rm -f "$stage/etc/qwen3-bpfd/qwen3-bpfd.conf.default"
install -D -m 0755 "$root_dir/scripts/install-default-model.sh" "$stage/usr/libexec/qwen3-bpfd/install-default-model"

doc=$stage/usr/share/doc/qwen3-bpfd
install -D -m 0644 "$root_dir/README.md" "$doc/README.md"
install -m 0644 "$root_dir"/docs/*.md "$doc/"
install -m 0644 "$pkg_dir/copyright" "$doc/copyright"
commit=$(git -C "$root_dir" rev-parse --short HEAD 2>/dev/null || echo unknown)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$root_dir" log -1 --format=%ct 2>/dev/null || date +%s)}
maintainer="qwen3-bpfd maintainers <maintainers@users.noreply.a-seed-caa496cd.example>"
{
  printf 'qwen3-bpfd (%s) unstable; urgency=medium\n\n' "$version"
  printf '  * Built from the qwen3-bpfd source tree at commit %s.\n\n' "$commit"
  printf ' -- %s  %s\n' "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$doc/changelog.gz"

# Man pages from each program's --help.
declare -A summaries=(
  [qwen3-bpfd]="Qwen3 inference daemon running the model in verified eBPF programs"
  [qwen3-bpf]="command-line client of qwen3-bpfd"
  [qwen3-bpf-run]="run a Qwen3 model in eBPF without the daemon"
  [qwen3-bpf-mkmodel]="write a random Qwen3 model directory for tests"
  [qwen3-bpf-bench]="benchmark the eBPF operators and the model"
  [qwen3-bpf-shapecheck]="check that a Qwen3 config.json's shape passes the BPF verifier"
)
mkdir -p "$stage/usr/share/man/man1"
for path in "$stage"/usr/bin/*; do
  prog=${path##*/}
  [[ -n ${summaries[$prog]:-} ]] || die "no man-page summary for $prog: add it to 'summaries' in $0"
  help2man -N --no-discard-stderr --version-string="$version" -n "${summaries[$prog]}" \
    -o "$stage/usr/share/man/man1/$prog.1" "$stage/usr/bin/$prog" 2>"$work/help2man.log" ||
    { cat "$work/help2man.log" >&2; die "help2man failed for $prog"; }
  gzip -9n "$stage/usr/share/man/man1/$prog.1"
done

# Debug info stays in the build tree.
elfs=()
while IFS= read -r f; do
  head -c4 "$f" | grep -q ELF && elfs+=("$f")
done < <(find "$stage/usr/bin" "$stage/usr/libexec" -type f)
strip --strip-unneeded --remove-section=.comment --remove-section=.note "${elfs[@]}"

# dpkg-shlibdeps finds the package root by its DEBIAN directory.
mkdir -p "$stage/DEBIAN"
printf 'Source: qwen3-bpfd\n\nPackage: qwen3-bpfd\nArchitecture: amd64\n' >"$work/debian/control"
shlibs=$(cd "$work" && dpkg-shlibdeps -O "${elfs[@]#"$work"/}" | sed -n 's/^shlibs:Depends=//p')
[[ -n $shlibs ]] || die "dpkg-shlibdeps found no library dependencies"
# libbpf's symbols file says 1.2 for the functions called; the arena maps and
# the BTF the programs rely on need the 1.4 that the build requires.
shlibs=$(sed 's/libbpf1 ([^)]*)/libbpf1 (>= 1:1.4)/' <<<"$shlibs")
grep -q 'libbpf1 (>= 1:1.4)' <<<"$shlibs" || die "dpkg-shlibdeps did not list libbpf1: $shlibs"

find "$stage" -type d -exec chmod 0755 {} +
find "$stage" -type f ! -perm -u+x -exec chmod 0644 {} +
find "$stage" -type f -perm -u+x -exec chmod 0755 {} +
installed_size=$(du -sk --apparent-size "$stage" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@MAINTAINER@|$maintainer|" -e "s|@SHLIBS@|$shlibs|" \
    -e "s|@INSTALLED_SIZE@|$installed_size|" "$pkg_dir/control.in" >"$stage/DEBIAN/control"
echo /etc/qwen3-bpfd/qwen3-bpfd.conf >"$stage/DEBIAN/conffiles"
install -m 0755 "$pkg_dir/postinst" "$pkg_dir/prerm" "$pkg_dir/postrm" "$stage/DEBIAN/"
(cd "$stage" && find usr -type f -print0 | sort -z | xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$stage/DEBIAN/md5sums"

mkdir -p "$out_dir"
deb=$out_dir/qwen3-bpfd_${version}_amd64.deb
dpkg-deb --root-owner-group -Zgzip --build "$stage" "$deb" >/dev/null
if ((do_lintian)); then
  command -v lintian >/dev/null || die "'lintian' is not installed (scripts/setup-deps.sh installs it)"
  lintian --fail-on error "$deb" >&2 || die "lintian reports errors for $deb"
fi
echo "$deb"
