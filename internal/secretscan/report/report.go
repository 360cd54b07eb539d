// Package report writes secretscan findings as gitleaks-compatible JSON,
// SARIF 2.1.0 or a table for a terminal
// (docs/adr/0030-secret-scanning-engine.md).
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/ghost-scm/ghost/internal/secretscan"
)

// Format names an output format.
type Format string

// The formats that --report-format accepts.
const (
	JSON  Format = "json"
	SARIF Format = "sarif"
	Table Format = "table"
)

// ParseFormat validates a --report-format value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(s)); f {
	case JSON, SARIF, Table:
		return f, nil
	}
	return "", fmt.Errorf("unknown report format %q (want json, sarif or table)", s)
}

// Write writes findings to w in format f. rules are the scan's rules, for
// SARIF's tool.driver.rules.
func Write(w io.Writer, f Format, rules []*secretscan.Rule, findings []secretscan.Finding) error {
	switch f {
	case JSON:
		return WriteJSON(w, findings)
	case SARIF:
		return WriteSARIF(w, rules, findings)
	default:
		return WriteTable(w, findings)
	}
}

// GitleaksFinding is one element of gitleaks' JSON report (its
// report.Finding's JSON fields), plus ghost's BlobID and SecretHMAC.
// Secret is always "REDACTED": ghost never writes a clear-text secret.
type GitleaksFinding struct {
	RuleID      string
	Description string
	StartLine   int
	EndLine     int
	StartColumn int
	EndColumn   int
	Match       string
	Secret      string
	File        string
	SymlinkFile string
	Commit      string
	Entropy     float32
	Author      string
	Email       string
	Date        string
	Message     string
	Tags        []string
	Fingerprint string
	BlobID      string `json:",omitempty"`
	SecretHMAC  string `json:",omitempty"`
}

// WriteJSON writes findings as a gitleaks JSON report (an array).
func WriteJSON(w io.Writer, findings []secretscan.Finding) error {
	out := make([]GitleaksFinding, 0, len(findings))
	for i := range findings {
		f := &findings[i]
		tags := f.Tags
		if tags == nil {
			tags = []string{}
		}
		out = append(out, GitleaksFinding{
			RuleID: f.RuleID, Description: f.Description,
			StartLine: f.StartLine, EndLine: f.EndLine, StartColumn: f.StartColumn, EndColumn: f.EndColumn,
			Match: f.Match, Secret: "REDACTED", File: f.Path, Commit: f.Commit, Entropy: f.Entropy,
			Author: f.Author, Email: f.Email, Date: f.Date, Message: f.Message, Tags: tags,
			Fingerprint: f.GitleaksFingerprint(), BlobID: f.BlobID, SecretHMAC: f.Fingerprint,
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// printable replaces what a terminal would interpret (escape sequences,
// control characters, invalid UTF-8: a match in a binary blob may hold
// any byte) with '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
}

// WriteTable writes one line per finding, for a terminal.
func WriteTable(w io.Writer, findings []secretscan.Finding) error {
	if len(findings) == 0 {
		_, err := fmt.Fprintln(w, "no secrets found")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tLOCATION\tCOMMIT\tMATCH")
	for i := range findings {
		f := &findings[i]
		commit := f.Commit
		if len(commit) > 12 {
			commit = commit[:12]
		}
		if commit == "" {
			commit = "-"
		}
		match := printable(strings.Join(strings.Fields(f.Match), " "))
		if len(match) > 60 {
			match = match[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s:%d\t%s\t%s\n", f.RuleID, printable(f.Path), f.StartLine, commit, match)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
