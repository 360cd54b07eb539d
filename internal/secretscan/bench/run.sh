#!/usr/bin/env bash
# Benchmark of ghost scan against gitleaks git on a real history: the Go
# tree ($(go env GOROOT)/src) committed once, then COMMITS commits that
# each edit a few files a little, as a real repository changes
# (docs/adr/0030-secret-scanning-engine.md, "Benchmark").
#
# usage: internal/secretscan/bench/run.sh [WORKDIR]
# needs: go, git, gitleaks (go install github.com/zricethezav/gitleaks/v8@v8.30.1),
#        GNU time (/usr/bin/time), jq. Not run by CI.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=${1:-$(mktemp -d /tmp/ghost-scan-bench.XXXXXX)}
commits=${COMMITS:-300}
files_per_commit=${FILES_PER_COMMIT:-10}
repo=$work/repo
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@ghost.invalid
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@ghost.invalid

if [ ! -d "$repo/.git" ]; then
  echo "== building $repo: Go tree + $commits commits of $files_per_commit edited files"
  mkdir -p "$repo"
  cp -r "$(go env GOROOT)/src/." "$repo/"
  git -C "$repo" init -q -b main
  git -C "$repo" add -A
  git -C "$repo" commit -q -m "import Go tree"
  mapfile -t files < <(git -C "$repo" ls-files '*.go' | awk 'NR % 7 == 0')
  RANDOM=42
  for ((c = 1; c <= commits; c++)); do
    for ((k = 0; k < files_per_commit; k++)); do
      f=${files[$((RANDOM * 32768 + RANDOM)) % ${#files[@]}]}
      printf '// edit %d.%d\n' "$c" "$k" >> "$repo/$f"
    done
    git -C "$repo" commit -q -a -m "edit $c"
  done
  git -C "$repo" gc -q
fi
echo "== repository"
git -C "$repo" count-objects -vH | grep -E 'count|size-pack'
echo "commits: $(git -C "$repo" rev-list --all --count)"

(cd "$root" && go build -o "$work/ghost" ./cmd/ghost)
gl=$(command -v gitleaks || echo "$(go env GOPATH)/bin/gitleaks")

measure() { # name, command...
  local name=$1; shift
  /usr/bin/time -v "$@" 2> "$work/$name.time" > /dev/null || true
  local wall rss cpu
  wall=$(grep 'Elapsed (wall clock)' "$work/$name.time" | awk '{print $NF}')
  rss=$(grep 'Maximum resident set size' "$work/$name.time" | awk '{print $NF}')
  # CPU seconds (user+sys, this process and its git children) do not
  # depend on what else runs on the machine; wall time does.
  cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.1f", s}' "$work/$name.time")
  printf '%-18s wall %-9s cpu %6ss  peak RSS %6d MiB\n' "$name" "$wall" "$cpu" $((rss / 1024))
  grep -E '^scanned' "$work/$name.time" || true
}

echo "== ghost scan vs gitleaks git (same repository, gitleaks' default rules v8.30.1)"
measure ghost-all-cores "$work/ghost" scan --no-progress --exit-code 0 --report-format json --report-path "$work/ghost.json" "$repo"
measure ghost-1-core "$work/ghost" scan --no-progress --workers 1 --exit-code 0 --report-format json --report-path "$work/ghost1.json" "$repo"
measure ghost-no-decode "$work/ghost" scan --no-progress --max-decode-depth 0 --exit-code 0 --report-format json --report-path "$work/ghost0.json" "$repo"
# What scanning binary blobs costs (docs/adr/0033-binary-blobs.md): the
# same scan skipping them, as gitleaks and ghost before issue 18 did.
measure ghost-skip-binary "$work/ghost" scan --no-progress --skip-binary --exit-code 0 --report-format json --report-path "$work/ghostsb.json" "$repo"
measure gitleaks "$gl" git --no-banner --log-level error --exit-code 0 --report-format json --report-path "$work/gitleaks.json" "$repo"

echo "== findings"
key='[.[] | "\(.RuleID) \(.Commit) \(.File):\(.StartLine)"] | sort | .[]'
jq -r "$key" "$work/ghost.json" > "$work/ghost.keys"
jq -r "$key" "$work/gitleaks.json" > "$work/gitleaks.keys"
echo "ghost: $(wc -l < "$work/ghost.keys")  gitleaks: $(wc -l < "$work/gitleaks.keys")"
echo "gitleaks only: $(comm -23 "$work/gitleaks.keys" "$work/ghost.keys" | wc -l)  ghost only: $(comm -13 "$work/gitleaks.keys" "$work/ghost.keys" | wc -l)"
comm -3 "$work/gitleaks.keys" "$work/ghost.keys" | head -20
echo "(work dir: $work)"
