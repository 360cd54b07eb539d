package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ghost-scm/ghost/"

// floors is the plan of docs/design.md §0: every package of the module
// and its floor. A package imports only packages on lower floors.
var floors = map[string]int{
	// 0: leaves, ports and wire formats.
	"internal/objstore": 0, "internal/coord": 0, "internal/gitsvc/pktline": 0,
	"internal/secretscan/codec": 0, "internal/httpx": 0, "internal/etcdserver": 0,
	"internal/gittest": 0, "internal/layers": 0, "internal/access": 0, "internal/ids": 0,
	"internal/client": 0, "internal/certfile": 0, "internal/tracing": 0, "internal/lfs/pointer": 0,
	// 1: the ports' backends, the record helper and the log.
	"internal/objstore/fsstore": 1, "internal/objstore/s3store": 1, "internal/objstore/memstore": 1,
	"internal/objstore/faultstore": 1, "internal/objstore/countstore": 1, "internal/objstore/storetest": 1,
	"internal/coord/etcdcoord": 1, "internal/coord/memcoord": 1, "internal/coord/coordtest": 1, "internal/objstore/s3store/s3test": 1,
	"internal/etcdserver/etcdtest": 1, "internal/record": 1, "internal/wal": 1, "internal/testkit": 1, "internal/objstore/latencystore": 1,
	// 2: the one way to run git.
	"internal/gitexec": 2,
	// 3: what reads git and the records of tenants and repositories.
	"internal/repocache": 3, "internal/secretscan": 3, "internal/meta": 3,
	// 4: what keeps the log and its findings; outbound events.
	"internal/compact": 4, "internal/gc": 4, "internal/alerts": 4, "internal/secretscan/report": 4,
	"internal/webhook": 4, "internal/pulls": 4,
	// 5: scanning: before the commit point, and in runs after it.
	"internal/pushprotect": 5, "internal/scanner": 5, "internal/hooks": 5,
	// 6: the git service both transports share.
	"internal/gitsvc": 6,
	// 7: the edges: transports, API, web UI.
	"internal/gitsvc/cacheadapter": 7, "internal/githttp": 7, "internal/sshd": 7,
	"internal/api": 7, "internal/web": 7, "internal/lfs": 7,
	// 8: configuration; the LFS SSH protocol over the LFS objects.
	"internal/config": 8, "internal/lfs/lfstransfer": 8,
	// 9: the composition root.
	"internal/server": 9,
	// 10: the command line, and the binary.
	"internal/cli": 10, "cmd/ghost": 11,
	// 12: harnesses and bench tools; nothing imports them.
	"internal/e2e": 12, "internal/loadtest": 12, "internal/clustertest": 12, "internal/gitbench": 12, "internal/scaletest": 12,
	"internal/secretscan/bench/scanbench": 12, "internal/secretscan/bench/reportdiff": 12,
}

// httpEdge may import net/http: the HTTP edge, the S3 client, the API's
// client, and what composes them. Anything else answers in its own errors.
var httpEdge = []string{
	"internal/httpx", "internal/githttp", "internal/api", "internal/web",
	"internal/objstore/s3store", "internal/server", "internal/cli",
	"internal/client", "internal/lfs", "internal/objstore/s3store/s3test", // the S3 test server
	"internal/webhook", // outbound: it posts events to hook URLs
}

// debts are known arrows against the plan, each with the issue item that
// removes it ({"internal/meta", "net/http"}: "issue 20 item 5" was one).
// The test fails when one is paid and still listed, so the list only
// shrinks. It is empty today.
var debts = map[[2]string]string{}

// pkg is what the check needs of go list's output.
type pkg struct {
	ImportPath string
	Imports    []string
}

// violations returns every arrow of pkgs against floors, httpEdge and
// debts, and every debt that no longer exists.
func violations(pkgs []pkg, floors map[string]int, httpEdge []string, debts map[[2]string]string) []string {
	var out []string
	seen := map[[2]string]bool{}
	listed := map[string]bool{}
	for _, p := range pkgs {
		from, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		listed[from] = true
		ff, ok := floors[from]
		if !ok {
			out = append(out, fmt.Sprintf("%s has no floor in the plan", from))
			continue
		}
		for _, imp := range p.Imports {
			arrow := [2]string{from, strings.TrimPrefix(imp, module)}
			if debts[arrow] != "" {
				seen[arrow] = true
				continue
			}
			if imp == "net/http" && !slices.Contains(httpEdge, from) {
				out = append(out, fmt.Sprintf("%s imports net/http below the HTTP edge", from))
			}
			to, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if tf, ok := floors[to]; ok && tf >= ff {
				out = append(out, fmt.Sprintf("%s (floor %d) imports %s (floor %d)", from, ff, to, tf))
			}
		}
	}
	for name := range floors {
		if !listed[name] {
			out = append(out, fmt.Sprintf("%s is in the plan but not in the module", name))
		}
	}
	for arrow, why := range debts {
		if !seen[arrow] {
			out = append(out, fmt.Sprintf("%s -> %s is paid (%s): remove it from debts", arrow[0], arrow[1], why))
		}
	}
	slices.Sort(out)
	return out
}

// TestFloors checks the module's import graph against the plan.
func TestFloors(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(b)); ; {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < len(floors) {
		t.Fatalf("go list named %d packages, the plan %d", len(pkgs), len(floors))
	}
	for _, v := range violations(pkgs, floors, httpEdge, debts) {
		t.Error(v)
	}
}

// TestViolations shows that the check fails when an arrow is added
// against the plan, whatever its kind.
func TestViolations(t *testing.T) {
	fl := map[string]int{"internal/wal": 1, "internal/meta": 3, "internal/cli": 10}
	edge := []string{"internal/cli"}
	base := func() []pkg {
		return []pkg{
			{module + "internal/wal", []string{"context"}},
			{module + "internal/meta", []string{module + "internal/wal"}},
			{module + "internal/cli", []string{module + "internal/meta", "net/http"}},
		}
	}
	if v := violations(base(), fl, edge, nil); len(v) != 0 {
		t.Fatalf("the plan as drawn: %v", v)
	}
	for _, tc := range []struct {
		name  string
		edit  func(p []pkg) []pkg
		debts map[[2]string]string
		want  string
	}{
		{"an import back up", func(p []pkg) []pkg {
			p[0].Imports = append(p[0].Imports, module+"internal/meta")
			return p
		}, nil, "internal/wal (floor 1) imports internal/meta (floor 3)"},
		{"a package not in the plan", func(p []pkg) []pkg {
			p = append(p, pkg{module + "internal/alerts", nil})
			return p
		}, nil, "internal/alerts has no floor in the plan"},
		{"net/http below the edge", func(p []pkg) []pkg {
			p[1].Imports = append(p[1].Imports, "net/http")
			return p
		}, nil, "internal/meta imports net/http below the HTTP edge"},
		{"cli imported", func(p []pkg) []pkg {
			p[1].Imports = append(p[1].Imports, module+"internal/cli")
			return p
		}, nil, "internal/meta (floor 3) imports internal/cli (floor 10)"},
		{"a package gone", func(p []pkg) []pkg { return p[1:] }, nil, "internal/wal is in the plan but not in the module"},
		{"a debt paid", func(p []pkg) []pkg { return p },
			map[[2]string]string{{"internal/meta", "net/http"}: "item 5"}, "internal/meta -> net/http is paid (item 5): remove it from debts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := violations(tc.edit(base()), fl, edge, tc.debts)
			if !slices.Contains(v, tc.want) {
				t.Errorf("violations %q, want %q among them", v, tc.want)
			}
		})
	}
}
