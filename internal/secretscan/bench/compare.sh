#!/usr/bin/env bash
# ghost scan against gitleaks git on real histories: local bare
# repositories given on the command line, each scanned ROUNDS times by
# both tools, alternating, in the same run. Nothing is fetched.
# (docs/adr/0036-scanner-on-real-histories.md)
#
# usage: internal/secretscan/bench/compare.sh [-r ROUNDS] [-w WORKDIR] REPO[=REV]...
#   REPO is a git directory; =REV scans only what REV reaches (both
#   tools: ghost scan --rev REV, gitleaks --log-opts with REV), else
#   every ref, each tool's default.
# needs: go, git, gitleaks v8.30.1 on PATH or in $(go env GOPATH)/bin
#   (go install github.com/zricethezav/gitleaks/v8@v8.30.1), GNU time.
# env: GHOST_ARGS adds flags to ghost scan (e.g. "--max-decode-depth 0").
#
# Per repository it prints, for each tool, the median wall and CPU time
# (user+sys of the process and its git children: the figure a loaded
# shared machine disturbs least), the largest peak RSS (GNU time: the
# largest single process), MiB read (ghost: blob bytes read from git;
# gitleaks: the bytes of the diffs it scanned, its own count), then the
# ratios and the findings diff from bench/reportdiff: strict keys (rule,
# commit, file, line) and loose keys (rule, file, secret).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
rounds=3
work=""
while getopts r:w: o; do
  case $o in
    r) rounds=$OPTARG ;;
    w) work=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { sed -n '2,21p' "$0"; exit 2; }
work=${work:-$(mktemp -d /tmp/ghost-compare.XXXXXX)}
mkdir -p "$work"
gl=$(command -v gitleaks || echo "$(go env GOPATH)/bin/gitleaks")
# go install leaves gitleaks' own version string unset: read the module's.
glver=$("$gl" version 2>/dev/null | grep -o '8\.30\.1' || go version -m "$gl" | awk '$1 == "mod" {print $3}')
case $glver in *8.30.1) ;; *) echo "need gitleaks v8.30.1, have ${glver:-unknown}"; exit 1 ;; esac
(cd "$root" && go build -o "$work/ghost" ./cmd/ghost && go build -o "$work/reportdiff" ./internal/secretscan/bench/reportdiff)
echo "ghost $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo +dirty), gitleaks $glver, rounds $rounds, work $work"

# run NAME OUT COMMAND...: one measured run; appends "wall cpu rss" to OUT.
run() {
  local name=$1 out=$2; shift 2
  /usr/bin/time -f '%e %U %S %M' -o "$work/$name.t" "$@" > "$work/$name.out" 2> "$work/$name.err" || {
    echo "$name failed:"; tail -5 "$work/$name.err"; exit 1; }
  awk '{printf "%.2f %.2f %d\n", $1, $2 + $3, $4}' "$work/$name.t" >> "$out"
}
median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

printf '\n%-14s %7s | %-28s | %-28s | %-11s | %s\n' repo commits "ghost wall/cpu/RSS/MiB" "gitleaks wall/cpu/RSS/MiB" "cpu, RSS" "findings"
for arg in "$@"; do
  repo=${arg%%=*}
  rev=""
  [ "$arg" != "$repo" ] && rev=${arg#*=}
  name=$(basename "$repo" .git)
  ghost_rev=() gl_opts=()
  if [ -n "$rev" ]; then
    ghost_rev=(--rev "$rev")
    gl_opts=(--log-opts "--full-history --diff-filter=tuxdb $rev")
    commits=$(git -C "$repo" rev-list --count "$rev")
  else
    commits=$(git -C "$repo" rev-list --count --all)
  fi
  : > "$work/$name.ghost.m"; : > "$work/$name.gitleaks.m"
  for ((i = 1; i <= rounds; i++)); do
    # shellcheck disable=SC2086
    run "$name.ghost.$i" "$work/$name.ghost.m" "$work/ghost" scan --no-progress --exit-code 0 ${GHOST_ARGS:-} "${ghost_rev[@]}" \
      --report-format json --report-path "$work/$name.ghost.json" "$repo"
    run "$name.gitleaks.$i" "$work/$name.gitleaks.m" "$gl" git --no-banner --log-level info --exit-code 0 "${gl_opts[@]}" \
      --report-format json --report-path "$work/$name.gitleaks.json" "$repo"
  done
  gmib=$(sed -nE 's/.*blobs read: ([0-9]+) bytes.*/\1/p; s/^scanned [0-9]+ blobs .*, ([0-9.]+) ([KMG])iB in.*/\1 \2/p' "$work/$name.ghost.1.err" | head -1 |
    awk '{ if (NF == 1) print $1 / 1048576; else print $1 * ($2 == "K" ? 1 / 1024 : $2 == "G" ? 1024 : 1) }')
  tmib=$(sed -nE 's/.*scanned ~([0-9]+) bytes.*/\1/p' "$work/$name.gitleaks.1.err" | head -1 | awk '{print $1 / 1048576}')
  gw=$(cut -d' ' -f1 "$work/$name.ghost.m" | median); gc=$(cut -d' ' -f2 "$work/$name.ghost.m" | median)
  gr=$(cut -d' ' -f3 "$work/$name.ghost.m" | sort -n | tail -1)
  tw=$(cut -d' ' -f1 "$work/$name.gitleaks.m" | median); tc=$(cut -d' ' -f2 "$work/$name.gitleaks.m" | median)
  tr=$(cut -d' ' -f3 "$work/$name.gitleaks.m" | sort -n | tail -1)
  diff=$("$work/reportdiff" -missed "$work/$name.missed" "$work/$name.ghost.json" "$work/$name.gitleaks.json")
  printf '%-14s %7s | %6.1fs %6.1fs %5dMiB %6.1f | %6.1fs %6.1fs %5dMiB %6.1f | %.2fx %.2fx | %s\n' \
    "$name" "$commits" "$gw" "$gc" $((gr / 1024)) "$gmib" "$tw" "$tc" $((tr / 1024)) "$tmib" \
    "$(echo "$gc $tc" | awk '{print $1 / $2}')" "$(echo "$gr $tr" | awk '{print $1 / $2}')" "$diff"
  echo "  cpu per round, ghost: $(cut -d' ' -f2 "$work/$name.ghost.m" | tr '\n' ' ')gitleaks: $(cut -d' ' -f2 "$work/$name.gitleaks.m" | tr '\n' ' ')"
done
