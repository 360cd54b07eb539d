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
# thin: the pack of A..B as a push sends it, completed (--fix-thin) as a
# receiving server stores it.
thin() { printf '%s\n^%s\n' "$3" "$2" | git -C "$SRC" pack-objects --revs --thin --stdout --delta-base-offset -q | git -C "$W/$1" index-pack --stdin --fix-thin >/dev/null; }
mk G
git -C "$SRC" rev-list --objects "$X" | git -C "$SRC" pack-objects -q --delta-base-offset "$W/G/objects/pack/pack" >/dev/null
printf '%s\n^%s\n' "$Y" "$X" | git -C "$SRC" pack-objects -q --revs --delta-base-offset "$W/G/objects/pack/pack" >/dev/null
thin G "$Y" "$L1"; thin G "$L1" "$L2"
rm "$W/G/objects/info/alternates"
git -C "$W/G" update-ref refs/heads/main "$L2"
git -C "$W/G" fsck --connectivity-only 2>/dev/null
mk H
git -C "$SRC" rev-list --objects "$Z" | git -C "$SRC" pack-objects -q --delta-base-offset "$W/H/objects/pack/pack" >/dev/null
rm "$W/H/objects/info/alternates"
git -C "$W/H" update-ref refs/heads/main "$Z"
git -C "$W/H" repack -a -d -q -b
echo "$SRC/objects" > "$W/H/objects/info/alternates"
prev=$Z
for i in $(seq 19859 10 19999); do c=${L[$i]}; thin H "$prev" "$c"; prev=$c; done
rm "$W/H/objects/info/alternates"
git -C "$W/H" update-ref refs/heads/main "$L2"
git -C "$W/H" fsck --connectivity-only 2>/dev/null
rm -rf "$W/GB"; cp -r "$W/G" "$W/GB"
s=$(date +%s%N); git -C "$W/GB" multi-pack-index write --bitmap; e=$(date +%s%N)
echo "GB's bitmap written in $(( (e - s) / 1000000 )) ms"
if [ "${4:-}" = W ]; then
	LAYOUTS="G GB H W"
	Yp=${L[18999]}
	mk W
	git -C "$SRC" rev-list --objects "$X" | git -C "$SRC" pack-objects -q --delta-base-offset "$W/W/objects/pack/pack" >/dev/null
	printf '%s\n^%s\n' "$Yp" "$X" | git -C "$SRC" pack-objects -q --revs --delta-base-offset "$W/W/objects/pack/pack" >/dev/null
	rm "$W/W/objects/info/alternates"
	git -C "$W/W" update-ref refs/heads/main "$Yp"
	git -C "$W/W" multi-pack-index write --bitmap
	echo "$SRC/objects" > "$W/W/objects/info/alternates"
	prev=$Yp
	for i in $(seq 19099 100 19999); do c=${L[$i]}; thin W "$prev" "$c"; prev=$c; done
	rm "$W/W/objects/info/alternates"
	git -C "$W/W" update-ref refs/heads/main "$L2"
	git -C "$W/W" fsck --connectivity-only 2>/dev/null
fi
for _ in $(seq 1 "$ROUNDS"); do
	for t in $LAYOUTS; do
		rm -rf "$W/clone.git"
		s=$(date +%s%N); git clone -q --bare "file://$W/$t" "$W/clone.git"; e=$(date +%s%N)
		echo "$t $(( (e - s) / 1000000 )) ms"
	done
done
rm -rf "$W/clone.git"
