package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/client"
)

// newRepoAlertsCmd returns "ghost repo alerts": the secret-scanning
// alerts of one repository (docs/adr/0070-alert-store.md), and its
// subcommands resolve and reopen. No output shows a secret.
func newRepoAlertsCmd(env *Env) *cobra.Command {
	var state, rule, format string
	cmd := &cobra.Command{
		Use:   "alerts <owner>/<name>",
		Short: "list a repository's secret-scanning alerts (table, json or sarif); resolve, reopen",
		Long: `List a repository's secret-scanning alerts, or change one's state with
the resolve and reopen subcommands. An alert is named by its id or any
unique prefix of it of at least 7 hex digits, as git names commits; the
table shows 12.`,
		Args: exactArgs(1),
	}
	t := newTarget(env, cmd)
	cmd.Flags().StringVar(&state, "state", "", "only alerts in this state: open, resolved or all (the default)")
	cmd.Flags().StringVar(&rule, "rule", "", "only alerts found by this rule id")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, json or sarif (SARIF 2.1.0, one result per location)")
	cmd.AddCommand(newAlertStateCmd(env, "resolve"), newAlertStateCmd(env, "reopen"))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		switch state {
		case "", "all", string(alerts.StateOpen), string(alerts.StateResolved):
		default:
			return usageErrorf("--state %q: want open, resolved or all", state)
		}
		var write func(io.Writer, string, []client.Alert) error
		full := true // every location of every alert
		switch format {
		case "table":
			write, full = writeAlertTable, false
		case "json":
			write = writeAlertJSON
		case "sarif":
			write = writeAlertSARIF
		default:
			return usageErrorf("--format %q: want table, json or sarif", format)
		}
		return t.runAPI(false, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			repo, err := c.Repo(ctx, owner, name)
			if err != nil {
				return err
			}
			var all []client.Alert
			f := client.AlertFilter{State: state, Rule: rule, PerPage: alerts.MaxPageSize}
			for {
				page, err := c.ListAlerts(ctx, owner, name, f)
				if err != nil {
					return err
				}
				all = append(all, page.Alerts...)
				if f.Page = page.NextPage; f.Page == "" {
					break
				}
			}
			if full {
				for i := range all {
					if err := allLocations(ctx, c, owner, name, &all[i]); err != nil {
						return err
					}
				}
			}
			return write(env.Stdout, repo.FullName, all)
		})(cmd, args)
	}
	return cmd
}

// allLocations reads the locations a list left out (it carries the first
// few of each alert), a page at a time.
func allLocations(ctx context.Context, c *conn, owner, name string, a *client.Alert) error {
	if a.LocationsCount <= len(a.Locations) {
		return nil
	}
	var locs []client.AlertLocation
	for page := 1; page != 0; {
		one, err := c.Alert(ctx, owner, name, a.ID, page)
		if err != nil {
			return err
		}
		locs = append(locs, one.Locations...)
		page = one.LocationsNextPage
	}
	a.Locations = locs
	return nil
}

// resolutions are what "ghost repo alerts resolve --reason" takes.
var resolutions = []string{string(alerts.ResolutionRevoked), string(alerts.ResolutionFalsePositive), string(alerts.ResolutionUsedInTests), string(alerts.ResolutionWontFix)}

// newAlertStateCmd returns "ghost repo alerts resolve" or "reopen".
func newAlertStateCmd(env *Env, verb string) *cobra.Command {
	var reason, comment string
	cmd := &cobra.Command{
		Use:   verb + " <owner>/<name> <alert-id>",
		Short: map[string]string{"resolve": "close an alert, with the reason", "reopen": "open a resolved alert again"}[verb],
		Args:  exactArgs(2),
	}
	if verb == "resolve" {
		cmd.Long = "Resolve an alert with --reason: " + strings.Join(resolutions, ", ") + ".\nThe id may be any unique prefix of at least 7 hex digits."
		cmd.Flags().StringVar(&reason, "reason", "", "why: "+strings.Join(resolutions, ", "))
		cmd.RegisterFlagCompletionFunc("reason", cobra.FixedCompletions(resolutions, cobra.ShellCompDirectiveNoFileComp))
	}
	cmd.Flags().StringVar(&comment, "comment", "", "a note kept in the alert's history")
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		ch := client.AlertChange{State: string(alerts.StateOpen), Comment: comment}
		if verb == "resolve" {
			if !slices.Contains(resolutions, reason) {
				return usageErrorf("--reason %q: want one of %s", reason, strings.Join(resolutions, ", "))
			}
			ch = client.AlertChange{State: string(alerts.StateResolved), Resolution: reason, Comment: comment}
		}
		return t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			a, err := c.UpdateAlert(ctx, owner, name, args[1], ch)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "alert %s of %s/%s: %s\n", a.ID[:12], owner, name, alertState(a))
			return nil
		})(cmd, args)
	}
	return cmd
}

func alertState(a client.Alert) string {
	if a.State == string(alerts.StateResolved) {
		return a.State + " (" + a.Resolution + ")"
	}
	return a.State
}

func writeAlertTable(w io.Writer, _ string, as []client.Alert) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tRULE\tLOCATIONS\tFIRST LOCATION\tMATCH\tCREATED")
	for _, a := range as {
		first := ""
		if len(a.Locations) > 0 {
			first = a.Locations[0].Where
		}
		n := fmt.Sprint(a.LocationsCount)
		if a.LocationsTruncated {
			n += "+"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", shortAlertID(a.ID), alertState(a), a.RuleID, n, oneLine(first), oneLine(a.SecretRedacted), a.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

// shortAlertID is the table's form of an alert id: 12 hex digits, which
// every command takes back (7 would do while unique).
func shortAlertID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
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

// writeAlertJSON writes the alerts as the API gives them, every location
// included; never the secret.
func writeAlertJSON(w io.Writer, _ string, as []client.Alert) error {
	if as == nil {
		as = []client.Alert{}
	}
	for i := range as {
		as[i].LocationsNextPage = 0
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(as)
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

func writeAlertSARIF(w io.Writer, repo string, as []client.Alert) error {
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
				Message:             sarifText{Text: fmt.Sprintf("%s: secret found (%s) in %s", l.RuleID, l.Match, repo)},
				PartialFingerprints: map[string]string{"ghostAlert/v1": a.ID},
				Properties:          map[string]any{"alert": a.ID, "state": a.State, "blob": l.BlobID},
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
			if a.State == string(alerts.StateResolved) {
				res.Suppressions = []sarifSuppression{{Kind: "external", Status: "accepted", Justification: a.Resolution}}
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
