package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// Scans is what the scan-run endpoints need; *scanner.Scanner is one.
type Scans interface {
	Runs(ctx context.Context, repoID string, limit int) ([]scanner.Status, error)
	Get(ctx context.Context, spec scanner.Spec) (scanner.Run, error)
	Status(ctx context.Context, r scanner.Run) (scanner.Status, error)
	StartFull(ctx context.Context, tenant, repoID string) (scanner.Run, bool, error)
	Lag(ctx context.Context, repoID string) (scanner.Lag, error)
}

// WithScans serves the secret-scanning run endpoints from s. Without it
// they answer 501.
func WithScans(s Scans) Option {
	return func(h *handler) { h.scans = s }
}

// Page sizes of the scan-run list: a page reads the runs it shows, never
// a repository's whole history of runs (docs/adr/0090-bounded-serving.md).
const maxScansPage = 100

// The scan-run endpoints (issue 13): whoever may read a repository sees
// its runs and their progress; starting a full-history run needs write
// access, as it costs the owner's shard budget. A repository the caller
// may not read is 404, so another tenant's runs are invisible.
func (h *handler) routeScans() {
	h.route("GET /api/repos/{owner}/{name}/scans", h.listScans)
	h.route("POST /api/repos/{owner}/{name}/scans", h.startScan)
	h.route("GET /api/repos/{owner}/{name}/scans/{id}", h.getScan)
}

var errNoScans = fmt.Errorf("secret scanning over the coordinator is not enabled on this server: %w", errors.ErrUnsupported)

// lagJSON is a repository's scan lag on the wire.
type lagJSON struct {
	Head                uint64     `json:"head_seq"`
	ScannedThrough      uint64     `json:"scanned_through_seq"`
	Pending             uint64     `json:"pending_pushes"`
	OldestPendingPushAt *time.Time `json:"oldest_pending_push_at,omitempty"`
}

// ScanJSON is a run on the wire.
type scanJSON struct {
	ID           string                `json:"id"` // <seq>-<kind>
	RunID        string                `json:"run_id"`
	Repository   string                `json:"repository"`
	Kind         string                `json:"kind"`
	Seq          uint64                `json:"seq"`
	State        string                `json:"state"`
	CreatedAt    time.Time             `json:"created_at"`
	ShardsDone   int                   `json:"shards_done"`
	ShardsTotal  int                   `json:"shards_total"`
	ShardsLeased int                   `json:"shards_leased"`
	Parked       []scanner.ParkedShard `json:"parked_shards,omitempty"`
	Blobs        int64                 `json:"blobs_scanned"`
	Bytes        int64                 `json:"bytes_scanned"`
	Findings     int64                 `json:"findings"`
	Covered      float64               `json:"covered"`
	Rate         float64               `json:"bytes_per_second"`
	ETASeconds   float64               `json:"eta_seconds,omitempty"`
}

func toScan(repo meta.Repo, st scanner.Status) scanJSON {
	return scanJSON{
		ID: scanID(st.Seq, st.Kind), RunID: strconv.FormatUint(st.ID, 10), Repository: repo.FullName(),
		Kind: string(st.Kind), Seq: st.Seq, State: st.State, CreatedAt: st.CreatedAt,
		ShardsDone: st.ShardsDone, ShardsTotal: st.ShardsTotal, ShardsLeased: st.ShardsLeased, Parked: st.Parked,
		Blobs: st.Blobs, Bytes: st.Bytes, Findings: st.Findings, Covered: st.Covered, Rate: st.Rate,
		ETASeconds: st.ETA.Seconds(),
	}
}

func scanID(seq uint64, k scanner.Kind) string { return strconv.FormatUint(seq, 10) + "-" + string(k) }

func parseScanID(s string) (uint64, scanner.Kind, bool) {
	for _, k := range []scanner.Kind{scanner.KindPush, scanner.KindFull} {
		suffix := "-" + string(k)
		if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
			seq, err := strconv.ParseUint(s[:len(s)-len(suffix)], 10, 64)
			return seq, k, err == nil
		}
	}
	return 0, "", false
}

func scanError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, scanner.ErrNotFound):
		return &kindError{err, meta.ErrNotFound}
	case errors.Is(err, scanner.ErrInvalid):
		return &kindError{err, meta.ErrInvalidArgument}
	}
	return &kindError{err, meta.ErrUnavailable}
}

func (h *handler) listScans(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if h.scans == nil {
		return 0, nil, errNoScans
	}
	repo, err := h.securityView(r, p)
	if err != nil {
		return 0, nil, err
	}
	limit := maxScansPage
	if v := r.URL.Query().Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, nil, fmt.Errorf("%w: per_page=%q: want a positive whole number", meta.ErrInvalidArgument, v)
		}
		limit = min(n, maxScansPage)
	}
	sts, err := h.scans.Runs(r.Context(), repo.ID, limit)
	if err != nil {
		return 0, nil, scanError(err)
	}
	lag, err := h.scans.Lag(r.Context(), repo.ID)
	if err != nil {
		return 0, nil, scanError(err)
	}
	out := struct {
		Scans []scanJSON `json:"scans"`
		// Lag says how far scans trail pushes
		// (docs/adr/0033-scan-coverage.md).
		Lag lagJSON `json:"lag"`
	}{Scans: make([]scanJSON, 0, len(sts)), Lag: lagJSON{Head: lag.Head, ScannedThrough: lag.Watermark, Pending: lag.Seqs}}
	if !lag.Oldest.IsZero() {
		t := lag.Oldest.UTC()
		out.Lag.OldestPendingPushAt = &t
	}
	for _, st := range sts {
		if st.Tenant != repo.Owner {
			continue // a record that is not this owner's is never shown
		}
		out.Scans = append(out.Scans, toScan(repo, st))
	}
	return http.StatusOK, out, nil
}

func (h *handler) getScan(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if h.scans == nil {
		return 0, nil, errNoScans
	}
	repo, err := h.securityView(r, p)
	if err != nil {
		return 0, nil, err
	}
	seq, kind, ok := parseScanID(r.PathValue("id"))
	if !ok {
		return 0, nil, fmt.Errorf("%w: scan id %q: want <seq>-push or <seq>-full", meta.ErrInvalidArgument, r.PathValue("id"))
	}
	run, err := h.scans.Get(r.Context(), scanner.Spec{Tenant: repo.Owner, RepoID: repo.ID, Kind: kind, Seq: seq})
	if err != nil {
		return 0, nil, scanError(err)
	}
	if run.Tenant != repo.Owner {
		return 0, nil, &kindError{fmt.Errorf("scan %s not found", r.PathValue("id")), meta.ErrNotFound}
	}
	st, err := h.scans.Status(r.Context(), run)
	if err != nil {
		return 0, nil, scanError(err)
	}
	return http.StatusOK, toScan(repo, st), nil
}

// startScan starts a full-history run at the repository's head. Asking
// again at the same head answers the same run (201 the first time, 200
// after).
func (h *handler) startScan(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if h.scans == nil {
		return 0, nil, errNoScans
	}
	repo, err := h.writable(r, p)
	if err != nil {
		return 0, nil, err
	}
	run, created, err := h.scans.StartFull(r.Context(), repo.Owner, repo.ID)
	if err != nil {
		return 0, nil, scanError(err)
	}
	st, err := h.scans.Status(r.Context(), run)
	if err != nil {
		return 0, nil, scanError(err)
	}
	h.log.InfoContext(r.Context(), "full scan requested", "repo", repo.FullName(), "seq", run.Seq, "by", p.Tenant, "created", created)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return status, toScan(repo, st), nil
}
