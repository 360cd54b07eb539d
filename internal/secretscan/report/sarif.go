package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/ghost-scm/ghost/internal/secretscan"
)

// The subset of SARIF 2.1.0 that a secret scan needs. The test validates
// the output against the vendored OASIS schema (testdata/sarif-2.1.0.json).
type (
	sarifLog struct {
		Schema  string     `json:"$schema"`
		Version string     `json:"version"`
		Runs    []sarifRun `json:"runs"`
	}
	sarifRun struct {
		Tool    sarifTool     `json:"tool"`
		Results []sarifResult `json:"results"`
	}
	sarifTool struct {
		Driver sarifDriver `json:"driver"`
	}
	sarifDriver struct {
		Name           string      `json:"name"`
		Version        string      `json:"version,omitempty"`
		InformationURI string      `json:"informationUri,omitempty"`
		Rules          []sarifRule `json:"rules"`
	}
	sarifRule struct {
		ID               string       `json:"id"`
		ShortDescription sarifMessage `json:"shortDescription"`
	}
	sarifMessage struct {
		Text string `json:"text"`
	}
	sarifResult struct {
		RuleID              string            `json:"ruleId"`
		RuleIndex           int               `json:"ruleIndex"`
		Level               string            `json:"level"`
		Message             sarifMessage      `json:"message"`
		Locations           []sarifLocation   `json:"locations"`
		PartialFingerprints map[string]string `json:"partialFingerprints"`
		Properties          map[string]any    `json:"properties,omitempty"`
	}
	sarifLocation struct {
		PhysicalLocation sarifPhysical `json:"physicalLocation"`
	}
	sarifPhysical struct {
		ArtifactLocation sarifArtifact `json:"artifactLocation"`
		Region           *sarifRegion  `json:"region,omitempty"`
	}
	sarifArtifact struct {
		URI string `json:"uri"`
	}
	sarifRegion struct {
		StartLine   int          `json:"startLine"`
		StartColumn int          `json:"startColumn,omitempty"`
		EndLine     int          `json:"endLine,omitempty"`
		EndColumn   int          `json:"endColumn,omitempty"`
		Snippet     sarifMessage `json:"snippet"`
	}
)

// WriteSARIF writes a SARIF 2.1.0 log: rules in tool.driver.rules, one
// result per finding with its physicalLocation and region, and
// partialFingerprints carrying the commit, the gitleaks fingerprint and the
// secret's HMAC (stable across runs with the same key, for deduplication).
func WriteSARIF(w io.Writer, rules []*secretscan.Rule, findings []secretscan.Finding) error {
	drv := sarifDriver{
		Name:           "ghost-scan",
		InformationURI: "https://github.com/ghost-scm/ghost",
		Rules:          make([]sarifRule, 0, len(rules)),
	}
	index := make(map[string]int, len(rules))
	for i, r := range rules {
		index[r.ID] = i
		drv.Rules = append(drv.Rules, sarifRule{ID: r.ID, ShortDescription: sarifMessage{Text: r.Description}})
	}
	results := make([]sarifResult, 0, len(findings))
	for i := range findings {
		f := &findings[i]
		msg := fmt.Sprintf("%s has detected secret for file %s.", f.RuleID, f.Path)
		if f.Commit != "" {
			msg = fmt.Sprintf("%s has detected secret for file %s at commit %s.", f.RuleID, f.Path, f.Commit)
		}
		loc := sarifLocation{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: f.Path}}}
		if f.StartLine > 0 {
			loc.PhysicalLocation.Region = &sarifRegion{
				StartLine: f.StartLine, StartColumn: max(1, f.StartColumn),
				EndLine: max(f.StartLine, f.EndLine), EndColumn: max(1, f.EndColumn),
				Snippet: sarifMessage{Text: f.Match},
			}
		}
		fp := map[string]string{
			"gitleaksFingerprint/v1": f.GitleaksFingerprint(),
			"secretHmac/v1":          f.Fingerprint,
		}
		if f.Commit != "" {
			fp["commitSha"] = f.Commit
		}
		idx, ok := index[f.RuleID]
		if !ok {
			idx = -1
		}
		props := map[string]any{}
		if len(f.Tags) > 0 {
			props["tags"] = f.Tags
		}
		if f.BlobID != "" {
			props["blobId"] = f.BlobID
		}
		results = append(results, sarifResult{
			RuleID: f.RuleID, RuleIndex: idx, Level: "error", Message: sarifMessage{Text: msg},
			Locations: []sarifLocation{loc}, PartialFingerprints: fp, Properties: props,
		})
	}
	log := sarifLog{
		Schema:  "https://json.schemastore.org/sarif-2.1.0.json",
		Version: "2.1.0",
		Runs:    []sarifRun{{Tool: sarifTool{Driver: drv}, Results: results}},
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	if err := enc.Encode(log); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
