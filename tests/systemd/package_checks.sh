# The Debian package's life cycle in the booted container. Sourced by
# container_test.sh --package after boot, with: $deb (the .deb, built from the
# build tree), $root (the container's root), in_ct, run_ct, unit_prop, say,
# die, record_progs, all_prog_ids, stop_container, hold_here. The container has
# no network: apt installs the .deb from the rootfs's packages only, which
# proves the Depends line is satisfiable from bookworm + bookworm-backports.
# The daemon serves the tiny test model (models/tiny, copied in before boot).

apt_ct() { in_ct env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0 "$@"; }
# The host pids of the container's qwen3-bpfd processes.
ct_daemons() {
  local p
  for p in $(pgrep -x qwen3-bpfd || true); do
    [[ $(readlink "/proc/$p/ns/pid" 2>/dev/null) == "$ct_pidns" ]] && echo "$p"
  done
  return 0
}
state=/var/lib/qwen3-bpfd
all_prog_ids=
conf=/etc/qwen3-bpfd/qwen3-bpfd.conf
cp "$deb" "$root/var/tmp/"
ct_deb=/var/tmp/$(basename "$deb")

say "package: apt install $ct_deb"
out=$(apt_ct install --no-install-recommends "$ct_deb" 2>&1) || die "apt install of the package failed:"$'\n'"$out"
in_ct dpkg-query -W -f='${Status}\n' qwen3-bpfd | grep -qx 'install ok installed' || die "qwen3-bpfd is not installed after apt install"
in_ct getent group qwen3-bpf >/dev/null || die "postinst did not create the group qwen3-bpf"
in_ct dpkg-query -W -f='${Conffiles}\n' qwen3-bpfd | grep -q "^ $conf " || die "$conf is not a conffile of the package"
for unit in qwen3-bpfd.socket qwen3-bpfd-http.socket; do
  [[ $(in_ct systemctl is-enabled "$unit" 2>&1) == enabled ]] || die "postinst did not enable $unit"
  [[ $(unit_prop "$unit" ActiveState) == active ]] || die "postinst did not start $unit"
done
[[ $(unit_prop qwen3-bpfd.service ActiveState) == inactive ]] || die "postinst started the daemon (it starts on the first connection)"
shipped_sum=$(in_ct sha256sum /usr/share/qwen3-bpfd/models/qwen3-kerneldoc.tar.xz | cut -d' ' -f1)
[[ $(in_ct cat "$state/models/default/SHIPPED_SHA256" 2>/dev/null) == "$shipped_sum" ]] &&
  in_ct test -f "$state/models/default/config.json" || die "postinst did not unpack the shipped model into $state/models/default"
in_ct man -w qwen3-bpf >/dev/null 2>&1 || in_ct test -f /usr/share/man/man1/qwen3-bpf.1.gz || die "no man page for qwen3-bpf"

say "package: serve the tiny test model (conffile edited), systemctl start qwen3-bpfd, generate"
in_ct sed -i "s|^#model_dir =.*|model_dir = $state/models/tiny|" "$conf"
in_ct grep -q "^model_dir = $state/models/tiny" "$conf" || die "cannot set model_dir in $conf"
in_ct systemctl start qwen3-bpfd || die "systemctl start qwen3-bpfd failed"
out=$(run_ct -- qwen3-bpf generate --max-tokens 4 --seed 1 "Hello" 2>&1) || die "qwen3-bpf generate failed:"$'\n'"$out"
[[ -n ${out//[[:space:]]/} ]] || die "qwen3-bpf generate printed no text"
session=$(run_ct -- qwen3-bpf sessions create 2>&1) || die "qwen3-bpf sessions create failed: $session"
out=$(run_ct -- qwen3-bpf generate --session "$session" --max-tokens 4 --seed 1 "Hello" 2>&1) ||
  die "generate in session $session failed:"$'\n'"$out"
# The tokens a session holds: "positions: P of C (history N tokens)".
session_history() {
  local out
  out=$(run_ct -- qwen3-bpf sessions show "$1" 2>&1) || { echo "sessions show $1 failed: $out"; return 1; }
  sed -n 's/^positions:.*(history \([0-9]*\) tokens).*/\1/p' <<<"$out"
}
held_before=$(session_history "$session") || die "$held_before"
[[ $held_before =~ ^[1-9][0-9]*$ ]] || die "session $session holds no tokens after a generation: '$held_before'"
old_pid=$(unit_prop qwen3-bpfd.service MainPID)
record_progs

say "package: apt reinstall of the same version over the running daemon keeps the session"
out=$(apt_ct install --reinstall --no-install-recommends "$ct_deb" 2>&1) || die "apt reinstall failed:"$'\n'"$out"
[[ $(unit_prop qwen3-bpfd.service ActiveState) == active ]] || die "the daemon is not running after the reinstall"
new_pid=$(unit_prop qwen3-bpfd.service MainPID)
[[ $new_pid != "$old_pid" ]] || die "the reinstall did not restart the daemon (still pid $old_pid, the old binary)"
daemons=$(ct_daemons | wc -l)
[[ $daemons -eq 1 ]] || die "$daemons qwen3-bpfd processes run after the reinstall (want 1)"
in_ct grep -q "^model_dir = $state/models/tiny" "$conf" || die "the reinstall lost the edit of the conffile $conf"
held_after=$(session_history "$session") || die "session $session is gone after the reinstall: $held_after"
[[ $held_after == "$held_before" ]] ||
  die "session $session held $held_before tokens before the reinstall, '$held_after' after"
out=$(run_ct -- qwen3-bpf generate --session "$session" --append --max-tokens 2 " world" 2>&1) ||
  die "generate in the kept session failed:"$'\n'"$out"
record_progs

say "package: with a qwen3-bpfd running outside its unit, a reinstall starts no socket unit beside it"
in_ct systemctl stop qwen3-bpfd.socket qwen3-bpfd-http.socket qwen3-bpfd.service
in_ct systemd-run --quiet --unit=qwen3-foreign -- /usr/bin/qwen3-bpfd --foreground || die "cannot start a qwen3-bpfd by hand"
out=$(run_ct -- qwen3-bpf status --wait --timeout 60 2>&1) || die "the hand-started qwen3-bpfd does not serve:"$'\n'"$out"
record_progs
out=$(apt_ct install --reinstall --no-install-recommends "$ct_deb" 2>&1) || die "apt reinstall beside a hand-started daemon failed:"$'\n'"$out"
grep -q "runs outside systemd; the socket units are not started" <<<"$out" ||
  die "postinst did not say why it leaves the sockets stopped:"$'\n'"$out"
for unit in qwen3-bpfd.socket qwen3-bpfd-http.socket qwen3-bpfd.service; do
  [[ $(unit_prop "$unit" ActiveState) == inactive ]] || die "postinst started $unit beside the hand-started daemon"
done
daemons=$(ct_daemons | wc -l)
[[ $daemons -eq 1 ]] || die "$daemons qwen3-bpfd processes run beside the hand-started one's reinstall (want 1)"
in_ct systemctl stop qwen3-foreign.service
in_ct systemctl start qwen3-bpfd.socket qwen3-bpfd-http.socket || die "cannot start the socket units again"

say "package: apt remove stops the daemon and keeps the state"
out=$(apt_ct remove qwen3-bpfd 2>&1) || die "apt remove failed:"$'\n'"$out"
for unit in qwen3-bpfd.service qwen3-bpfd.socket qwen3-bpfd-http.socket; do
  [[ $(unit_prop "$unit" ActiveState) == inactive ]] || die "$unit is $(unit_prop "$unit" ActiveState) after apt remove"
done
[[ -z $(ct_daemons) ]] || die "a qwen3-bpfd process runs after apt remove"
in_ct test -f "$state/models/default/config.json" -a -f "$state/models/tiny/config.json" || die "apt remove deleted the models in $state"
in_ct test -f "$state/sessions.json" || die "apt remove deleted the saved sessions ($state/sessions.json)"
in_ct test -f "$conf" || die "apt remove deleted the conffile $conf"
in_ct test -e /usr/bin/qwen3-bpfd && die "apt remove left /usr/bin/qwen3-bpfd"

say "package: apt purge removes the state and leaves no unit"
out=$(apt_ct purge qwen3-bpfd 2>&1) || die "apt purge failed:"$'\n'"$out"
in_ct test -e "$state" && die "apt purge left $state"
in_ct test -e "$conf" && die "apt purge left $conf"
in_ct dpkg-query -W qwen3-bpfd >/dev/null 2>&1 && die "dpkg still knows qwen3-bpfd after apt purge"
# (list-unit-files exits 1 when nothing matches)
left=$(in_ct systemctl list-units --all --plain --no-legend 'qwen3-bpfd*' 2>&1
       in_ct systemctl list-unit-files --plain --no-legend 'qwen3-bpfd*' 2>&1 || true)
[[ -z ${left//[[:space:]]/} ]] || die "units left after apt purge:"$'\n'"$left"
links=$(in_ct find /etc/systemd/system -name 'qwen3-bpfd*' 2>&1)
[[ -z $links ]] || die "unit links left after apt purge:"$'\n'"$links"

hold_here
stop_container
say "check: no BPF program of the container's daemons remains in the host kernel"
for id in $all_prog_ids; do
  bpftool prog show id "$id" >/dev/null 2>&1 && die "BPF program $id loaded in the container is still in the kernel"
done
say "PASS: the Debian package installs, serves, upgrades in place, removes and purges"
