#!/usr/bin/env bash
# Rebuilds, with git alone, the pack layouts of the end of
# BenchmarkBusyRepository at N = 2,000 (docs/design.md §3.8) and clones
# each in turn, to tell a clone's cost in the packs from ghost's serving:
#
#   G   ghost's cold node: a full repack to push 1,500, a roll-up to push
#       1,998, two completed 10-commit layers; no bitmap
#   GB  G with a multi-pack index and bitmap
#   H   http-backend's: one `git repack -a -d -b` pack with its bitmap to
#       push 1,985, and the 15 completed pushes after it
#   W   a warm node's: the full repack to push 1,500, a pack to push 1,900,
#       a multi-pack bitmap over those two, and ten 10-push packs after
#       it (run with W as the fourth argument; it is built only then)
#
# Usage: clone-layouts.sh /path/to/git.git WORKDIR [ROUNDS [W]]
# The source must hold master's history; nothing is written to it.
set -euo pipefail
SRC=$(cd "$1" && pwd); W=$2; ROUNDS=${3:-3}; LAYOUTS="G GB H"
mkdir -p "$W"; W=$(cd "$W" && pwd)
mapfile -t L < <(git -C "$SRC" rev-list --first-parent --reverse master)
X=${L[14999]}; Y=${L[19979]}; L1=${L[19989]}; L2=${L[19999]}; Z=${L[19849]}
mk() { rm -rf "$W/$1"; git init -q --bare "$W/$1"; echo "$SRC/objects" > "$W/$1/objects/info/alternates"; }
# full: every object TIP reaches, in one pack (a full repack).
full() { git -C "$SRC" rev-list --objects "$2" | git -C "$SRC" pack-objects -q --delta-base-offset "$W/$1/objects/pack/pack" >/dev/null; }
# between: the objects of FROM..TO, in one self-contained pack (a roll-up).
between() { printf '%s\n^%s\n' "$3" "$2" | git -C "$SRC" pack-objects -q --revs --delta-base-offset "$W/$1/objects/pack/pack" >/dev/null; }
# thin: the pack of A..B as a push sends it, completed (--fix-thin) as a
# receiving server stores it.
thin() { printf '%s\n^%s\n' "$3" "$2" | git -C "$SRC" pack-objects --revs --thin --stdout --delta-base-offset -q | git -C "$W/$1" index-pack --stdin --fix-thin >/dev/null; }
# pushes: thin packs from first-parent commit FROM to LAST, STEP apart.
pushes() { local prev=${L[$2]} c; for i in $(seq $(($2 + $3)) "$3" "$4"); do c=${L[$i]}; thin "$1" "$prev" "$c"; prev=$c; done; }
# detach: the repository stops borrowing the source's objects, main
# points at TIP, and everything TIP reaches is there.
detach() { rm "$W/$1/objects/info/alternates"; git -C "$W/$1" update-ref refs/heads/main "$2"; git -C "$W/$1" fsck --connectivity-only 2>/dev/null; }
mk G
full G "$X"
between G "$X" "$Y"
thin G "$Y" "$L1"; thin G "$L1" "$L2"
detach G "$L2"
mk H
full H "$Z"
detach H "$Z"
git -C "$W/H" repack -a -d -q -b
echo "$SRC/objects" > "$W/H/objects/info/alternates"
pushes H 19849 10 19999
detach H "$L2"
rm -rf "$W/GB"; cp -r "$W/G" "$W/GB"
s=$(date +%s%N); git -C "$W/GB" multi-pack-index write --bitmap; e=$(date +%s%N)
echo "GB's bitmap written in $(( (e - s) / 1000000 )) ms"
if [ "${4:-}" = W ]; then
	LAYOUTS="G GB H W"
	Yp=${L[18999]}
	mk W
	full W "$X"
	between W "$X" "$Yp"
	detach W "$Yp"
	git -C "$W/W" multi-pack-index write --bitmap
	echo "$SRC/objects" > "$W/W/objects/info/alternates"
	pushes W 18999 100 19999
	detach W "$L2"
fi
for _ in $(seq 1 "$ROUNDS"); do
	for t in $LAYOUTS; do
		rm -rf "$W/clone.git"
		s=$(date +%s%N); git clone -q --bare "file://$W/$t" "$W/clone.git"; e=$(date +%s%N)
		echo "$t $(( (e - s) / 1000000 )) ms"
	done
done
rm -rf "$W/clone.git"
