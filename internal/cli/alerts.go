package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/wal"
)

// newRepoAlertsCmd returns "ghost repo alerts": the secret-scanning
// alerts of one repository, read from the object store like every admin
// command (docs/adr/0070-alert-store.md). No output shows a secret.
func newRepoAlertsCmd(env *Env) *cobra.Command {
	var state, rule, format string
	cmd := &cobra.Command{
		Use:   "alerts <owner>/<name>",
		Short: "list a repository's secret-scanning alerts (table, json or sarif)",
		Args:  exactArgs(1),
	}
	a := newAdmin(env, cmd)
	cmd.Flags().StringVar(&state, "state", "", "only alerts in this state: open or resolved")
	cmd.Flags().StringVar(&rule, "rule", "", "only alerts found by this rule id")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, json or sarif (SARIF 2.1.0, one result per location)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		switch state {
		case "", string(alerts.StateOpen), string(alerts.StateResolved):
		default:
			return usageErrorf("--state %q: want open or resolved", state)
		}
		var write func(io.Writer, meta.Repo, []alerts.Alert) error
		switch format {
		case "table":
			write = writeAlertTable
		case "json":
			write = writeAlertJSON
		case "sarif":
			write = writeAlertSARIF
		default:
			return usageErrorf("--format %q: want table, json or sarif", format)
		}
		ms, as, err := a.openAlerts(ctx)
		if err != nil {
			return err
		}
		repo, err := ms.Repo(ctx, owner, name)
		if err != nil {
			return err
		}
		var all []alerts.Alert
		f := alerts.Filter{Tenant: repo.Owner, RepoID: repo.ID, State: alerts.State(state), Rule: rule}
		for tok := ""; ; {
			page, err := as.ListFull(ctx, f, tok, alerts.MaxPageSize)
			if err != nil {
				return err
			}
			all = append(all, page.Alerts...)
			if tok = page.Next; tok == "" {
				break
			}
		}
		if err := write(env.Stdout, repo, all); err != nil {
			return err
		}
		a.read()
		return nil
	}
	return cmd
}

// openAlerts returns the metadata and alert stores on the configured
// object store.
func (a *admin) openAlerts(ctx context.Context) (*meta.Store, *alerts.Store, error) {
	objects, err := a.cfg.OpenStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	return meta.New(objects, wal.New(objects, wal.Options{})), alerts.New(objects), nil
}

func alertState(a alerts.Alert) string {
	if a.State == alerts.StateResolved {
		return string(a.State) + " (" + string(a.Resolution) + ")"
	}
	return string(a.State)
}

func writeAlertTable(w io.Writer, _ meta.Repo, as []alerts.Alert) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tRULE\tLOCATIONS\tFIRST LOCATION\tMATCH\tCREATED")
	for _, a := range as {
		first := ""
		if len(a.Locations) > 0 {
			l := a.Locations[0]
			first = l.Where()
		}
		n := fmt.Sprint(len(a.Locations))
		if a.LocationsTruncated {
			n += "+"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Fingerprint[:12], alertState(a), a.RuleID, n, first, oneLine(a.Redacted), a.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

// oneLine keeps a table row on one line, whatever a match holds, and
// keeps out what a terminal would interpret (a match in a binary blob may
// hold any byte).
func oneLine(s string) string {
	s = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", " ").Replace(s)
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// alertOut is the JSON form of an alert on the command line: the API's
// fields, never the secret.
type alertOut struct {
	ID                 string            `json:"id"`
	Repository         string            `json:"repository"`
	RuleID             string            `json:"rule_id"`
	Description        string            `json:"description,omitempty"`
	Rules              []string          `json:"rules"`
	SecretRedacted     string            `json:"secret_redacted"`
	State              alerts.State      `json:"state"`
	Resolution         alerts.Resolution `json:"resolution,omitempty"`
	ResolvedBy         string            `json:"resolved_by,omitempty"`
	ResolutionComment  string            `json:"resolution_comment,omitempty"`
	CreatedAt          time.Time         `json:"created_at"`
	UpdatedAt          time.Time         `json:"updated_at"`
	Locations          []locationOut     `json:"locations"`
	LocationsTruncated bool              `json:"locations_truncated,omitempty"`
	Bypasses           []bypassOut       `json:"push_protection_bypasses,omitempty"`
}

type bypassOut struct {
	By     string              `json:"by"`
	Reason alerts.BypassReason `json:"reason"`
	At     time.Time           `json:"at"`
	Path   string              `json:"path,omitempty"`
	Line   int                 `json:"line,omitempty"`
	Source string              `json:"source,omitempty"`
	Ref    string              `json:"ref,omitempty"`
}

type locationOut struct {
	Commit string `json:"commit,omitempty"`
	Path   string `json:"path"`
	Line   int    `json:"line"`
	Column int    `json:"column,omitempty"`
	BlobID string `json:"blob_id"`
	Source string `json:"source,omitempty"`
	Ref    string `json:"ref,omitempty"`
	Where  string `json:"where"`
	RuleID string `json:"rule_id"`
	Match  string `json:"match"`
	Seq    uint64 `json:"seq,omitempty"`
}

func writeAlertJSON(w io.Writer, repo meta.Repo, as []alerts.Alert) error {
	out := make([]alertOut, 0, len(as))
	for _, a := range as {
		o := alertOut{
			ID: a.Fingerprint, Repository: repo.FullName(), RuleID: a.RuleID, Description: a.Description,
			Rules: a.Rules, SecretRedacted: a.Redacted, State: a.State, Resolution: a.Resolution,
			ResolvedBy: a.ResolvedBy, ResolutionComment: a.Comment, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt,
			Locations: make([]locationOut, 0, len(a.Locations)), LocationsTruncated: a.LocationsTruncated,
		}
		for _, b := range a.Bypasses {
			o.Bypasses = append(o.Bypasses, bypassOut{b.By, b.Reason, b.At, b.Path, b.Line, b.Source, b.Ref})
		}
		for _, l := range a.Locations {
			o.Locations = append(o.Locations, locationOut{l.Commit, l.Path, l.Line, l.Column, l.BlobID, l.Source, l.Ref, l.Where(), l.RuleID, l.Match, l.Seq})
		}
		out = append(out, o)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// SARIF 2.1.0 (OASIS), the subset ghost writes: one run, the rules that
// found something, and one result per location. A resolved alert's
// results carry an external suppression naming the resolution, which is
// how code-scanning tools show dismissed findings.
type sarifLog struct {
	Version string     `json:"version"`
	Schema  string     `json:"$schema"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri,omitempty"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID               string       `json:"id"`
	ShortDescription *sarifText   `json:"shortDescription,omitempty"`
	Properties       *sarifTagged `json:"properties,omitempty"`
}

type sarifTagged struct {
	Tags []string `json:"tags,omitempty"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID              string             `json:"ruleId"`
	RuleIndex           int                `json:"ruleIndex"`
	Level               string             `json:"level"`
	Message             sarifText          `json:"message"`
	Locations           []sarifLocation    `json:"locations"`
	PartialFingerprints map[string]string  `json:"partialFingerprints"`
	Suppressions        []sarifSuppression `json:"suppressions,omitempty"`
	Properties          map[string]any     `json:"properties,omitempty"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
}

type sarifSuppression struct {
	Kind          string `json:"kind"`
	Status        string `json:"status"`
	Justification string `json:"justification,omitempty"`
}

func writeAlertSARIF(w io.Writer, repo meta.Repo, as []alerts.Alert) error {
	run := sarifRun{
		Tool: sarifTool{Driver: sarifDriver{
			Name: "ghost secret scanning", InformationURI: "https://github.com/ghost-scm/ghost", Rules: []sarifRule{},
		}},
		Results: []sarifResult{},
	}
	index := map[string]int{}
	ruleIndex := func(id, desc string) int {
		if i, ok := index[id]; ok {
			return i
		}
		r := sarifRule{ID: id, Properties: &sarifTagged{Tags: []string{"secret"}}}
		if desc != "" {
			r.ShortDescription = &sarifText{Text: desc}
		}
		index[id] = len(run.Tool.Driver.Rules)
		run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, r)
		return index[id]
	}
	for _, a := range as {
		for _, l := range a.Locations {
			desc := ""
			if l.RuleID == a.RuleID {
				desc = a.Description
			}
			res := sarifResult{
				RuleID: l.RuleID, RuleIndex: ruleIndex(l.RuleID, desc), Level: "error",
				Message:             sarifText{Text: fmt.Sprintf("%s: secret found (%s) in %s", l.RuleID, l.Match, repo.FullName())},
				PartialFingerprints: map[string]string{"ghostAlert/v1": a.Fingerprint},
				Properties:          map[string]any{"alert": a.Fingerprint, "state": string(a.State), "blob": l.BlobID},
			}
			if l.Commit != "" {
				res.Properties["commit"] = l.Commit
			}
			if l.Source != "" {
				res.Properties["source"] = l.Source // the line is the object's (git cat-file -p)
			}
			if l.Ref != "" {
				res.Properties["ref"] = l.Ref
			}
			loc := sarifLocation{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: sarifURI(l.Path)}}}
			if l.Line >= 1 {
				loc.PhysicalLocation.Region = &sarifRegion{StartLine: l.Line, StartColumn: l.Column}
			}
			res.Locations = []sarifLocation{loc}
			if a.State == alerts.StateResolved {
				res.Suppressions = []sarifSuppression{{Kind: "external", Status: "accepted", Justification: string(a.Resolution)}}
			}
			run.Results = append(run.Results, res)
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(sarifLog{
		Version: "2.1.0",
		Schema:  "https://json.schemastore.org/sarif-2.1.0.json",
		Runs:    []sarifRun{run},
	})
}

// sarifURI makes a repository path a relative URI reference: each
// segment percent-encoded, the slashes kept.
func sarifURI(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
