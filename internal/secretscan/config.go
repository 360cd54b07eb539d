package secretscan

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// DefaultRulesVersion is the gitleaks release whose default rules are
// embedded (internal/secretscan/gitleaks/README.md). Pinning a version keeps
// scans reproducible; docs/adr/0030-secret-scanning-engine.md says why the
// TOML is vendored rather than imported from gitleaks' config package.
const DefaultRulesVersion = "v8.30.1"

//go:embed gitleaks/gitleaks.toml
var defaultTOML []byte

// maxExtendDepth bounds [extend] chains as gitleaks does (two levels).
const maxExtendDepth = 2

// ErrConfig marks a configuration that cannot be used: bad TOML, a regexp
// that does not compile, an invalid allowlist. Callers (the CLI) map it to
// a usage-style exit code.
var ErrConfig = errors.New("secretscan: invalid config")

// Config is a compiled rule set in gitleaks' .gitleaks.toml schema.
type Config struct {
	Title string
	// Path is the file the config was read from ("" for the default). A
	// file at this path is never scanned, as in gitleaks.
	Path       string
	Rules      []*Rule
	Allowlists []*Allowlist // global allowlists
}

// Rule is one detection rule (gitleaks config.Rule).
type Rule struct {
	ID          string
	Description string
	Regex       *regexp.Regexp // nil for a path-only rule
	SecretGroup int
	Entropy     float64
	Keywords    []string // lower-cased
	Path        *regexp.Regexp
	Tags        []string
	Allowlists  []*Allowlist
	SkipReport  bool
}

// Allowlist suppresses findings (gitleaks config.Allowlist).
type Allowlist struct {
	Description string
	// MatchAnd requires every configured check to hold (condition = "AND").
	MatchAnd bool
	Commits  map[string]struct{}
	Paths    *regexp.Regexp // alternation of all paths, nil if none
	Regexes  *regexp.Regexp // alternation of all regexes, nil if none
	// RegexTarget is "" (the secret), "match" or "line".
	RegexTarget string
	StopWords   []string // lower-cased
}

func (a *Allowlist) hasContentChecks() bool { return a.Regexes != nil || len(a.StopWords) > 0 }
func (a *Allowlist) hasLocationChecks() bool {
	return len(a.Commits) > 0 || a.Paths != nil
}

func (a *Allowlist) commitAllowed(c string) bool {
	if c == "" || len(a.Commits) == 0 {
		return false
	}
	_, ok := a.Commits[strings.ToLower(c)]
	return ok
}

func (a *Allowlist) pathAllowed(p string) bool {
	return p != "" && a.Paths != nil && a.Paths.MatchString(p)
}

func (a *Allowlist) regexAllowed(s string) bool {
	return s != "" && a.Regexes != nil && a.Regexes.MatchString(s)
}

func (a *Allowlist) containsStopWord(secret string) bool {
	if secret == "" || len(a.StopWords) == 0 {
		return false
	}
	s := strings.ToLower(secret)
	for _, w := range a.StopWords {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// The TOML schema, decoded by BurntSushi/toml, whose key matching is
// case-insensitive like gitleaks' viper.
type tomlConfig struct {
	Title       string
	Description string
	MinVersion  string `toml:"minVersion"`
	Extend      struct {
		Path          string
		URL           string
		UseDefault    bool     `toml:"useDefault"`
		DisabledRules []string `toml:"disabledRules"`
	}
	Rules []struct {
		ID          string
		Description string
		Path        string
		Regex       string
		SecretGroup int `toml:"secretGroup"`
		Entropy     float64
		Keywords    []string
		Tags        []string
		AllowList   *tomlAllowlist   `toml:"allowlist"` // deprecated form
		Allowlists  []*tomlAllowlist `toml:"allowlists"`
		SkipReport  bool             `toml:"skipReport"`
	}
	AllowList  *tomlAllowlist   `toml:"allowlist"` // deprecated form
	Allowlists []*tomlAllowlist `toml:"allowlists"`
}

type tomlAllowlist struct {
	Description string
	Condition   string
	Commits     []string
	Paths       []string
	RegexTarget string `toml:"regexTarget"`
	Regexes     []string
	StopWords   []string `toml:"stopwords"`
	TargetRules []string `toml:"targetRules"`
}

// DefaultConfig returns the embedded gitleaks default rules.
func DefaultConfig() (*Config, error) {
	return parseConfig(defaultTOML, "", 0)
}

// ParseConfig parses a .gitleaks.toml document. [extend] useDefault merges
// the default rules in; [extend] path loads another file (relative to the
// working directory, as in gitleaks).
func ParseConfig(data []byte) (*Config, error) {
	return parseConfig(data, "", 0)
}

// LoadConfig reads and parses the config file at path.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secretscan: read config: %w", err)
	}
	return parseConfig(data, path, 0)
}

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

func compile(expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, configErr("%v", err)
	}
	return re, nil
}

func joinRegexes(exprs []string) (*regexp.Regexp, error) {
	if len(exprs) == 0 {
		return nil, nil
	}
	for _, e := range exprs {
		if _, err := compile(e); err != nil {
			return nil, err
		}
	}
	return compile("(?:" + strings.Join(exprs, "|") + ")")
}

func parseAllowlist(t *tomlAllowlist) (*Allowlist, error) {
	a := &Allowlist{Description: t.Description}
	switch strings.ToUpper(t.Condition) {
	case "AND", "&&":
		a.MatchAnd = true
	case "", "OR", "||":
	default:
		return nil, configErr("unknown allowlist condition %q (expected 'and', 'or')", t.Condition)
	}
	switch t.RegexTarget {
	case "", "secret":
	case "match", "line":
		a.RegexTarget = t.RegexTarget
	default:
		return nil, configErr("unknown allowlist regexTarget %q (expected 'match', 'line')", t.RegexTarget)
	}
	if len(t.Commits)+len(t.Paths)+len(t.Regexes)+len(t.StopWords) == 0 {
		return nil, configErr("allowlist must contain at least one check for: commits, paths, regexes, or stopwords")
	}
	if len(t.Commits) > 0 {
		a.Commits = make(map[string]struct{}, len(t.Commits))
		for _, c := range t.Commits {
			a.Commits[strings.TrimSpace(strings.ToLower(c))] = struct{}{}
		}
	}
	seen := make(map[string]bool)
	for _, w := range t.StopWords {
		w = strings.ToLower(w)
		if !seen[w] {
			seen[w] = true
			a.StopWords = append(a.StopWords, w)
		}
	}
	var err error
	if a.Paths, err = joinRegexes(t.Paths); err != nil {
		return nil, err
	}
	if a.Regexes, err = joinRegexes(t.Regexes); err != nil {
		return nil, err
	}
	return a, nil
}

func parseConfig(data []byte, path string, depth int) (*Config, error) {
	var tc tomlConfig
	if _, err := toml.Decode(string(data), &tc); err != nil {
		return nil, configErr("%v", err)
	}
	c := &Config{Title: tc.Title, Path: path}
	byID := make(map[string]int)
	for _, tr := range tc.Rules {
		r := &Rule{
			ID:          tr.ID,
			Description: tr.Description,
			SecretGroup: tr.SecretGroup,
			Entropy:     tr.Entropy,
			Tags:        tr.Tags,
			SkipReport:  tr.SkipReport,
		}
		var err error
		if tr.Regex != "" {
			if r.Regex, err = compile(tr.Regex); err != nil {
				return nil, fmt.Errorf("rule %s: %w", tr.ID, err)
			}
		}
		if tr.Path != "" {
			if r.Path, err = compile(tr.Path); err != nil {
				return nil, fmt.Errorf("rule %s: %w", tr.ID, err)
			}
		}
		for _, k := range tr.Keywords {
			r.Keywords = append(r.Keywords, strings.ToLower(k))
		}
		als := tr.Allowlists
		if tr.AllowList != nil {
			if len(als) > 0 {
				return nil, configErr("%s: [rules.allowlist] is deprecated, it cannot be used alongside [[rules.allowlists]]", tr.ID)
			}
			als = []*tomlAllowlist{tr.AllowList}
		}
		for _, ta := range als {
			a, err := parseAllowlist(ta)
			if err != nil {
				return nil, fmt.Errorf("rule %s: [[rules.allowlists]]: %w", tr.ID, err)
			}
			r.Allowlists = append(r.Allowlists, a)
		}
		// A later duplicate id replaces the earlier rule, as in gitleaks' map.
		if i, dup := byID[r.ID]; dup {
			c.Rules[i] = r
		} else {
			byID[r.ID] = len(c.Rules)
			c.Rules = append(c.Rules, r)
		}
	}

	globals := tc.Allowlists
	if tc.AllowList != nil {
		if len(globals) > 0 {
			return nil, configErr("[allowlist] is deprecated, it cannot be used alongside [[allowlists]]")
		}
		globals = []*tomlAllowlist{tc.AllowList}
	}
	targeted := make(map[string][]*Allowlist)
	var targetOrder []string
	for _, ta := range globals {
		a, err := parseAllowlist(ta)
		if err != nil {
			return nil, fmt.Errorf("[[allowlists]]: %w", err)
		}
		if len(ta.TargetRules) == 0 {
			c.Allowlists = append(c.Allowlists, a)
			continue
		}
		for _, id := range ta.TargetRules {
			if _, ok := targeted[id]; !ok {
				targetOrder = append(targetOrder, id)
			}
			targeted[id] = append(targeted[id], a)
		}
	}

	if depth < maxExtendDepth {
		if tc.Extend.Path != "" && tc.Extend.UseDefault {
			return nil, configErr("extend.path and extend.useDefault cannot both be set")
		}
		var base *Config
		var err error
		switch {
		case tc.Extend.UseDefault:
			base, err = parseConfig(defaultTOML, "", depth+1)
		case tc.Extend.Path != "":
			var d []byte
			if d, err = os.ReadFile(tc.Extend.Path); err != nil {
				return nil, fmt.Errorf("secretscan: read extended config: %w", err)
			}
			base, err = parseConfig(d, tc.Extend.Path, depth+1)
		}
		if err != nil {
			return nil, fmt.Errorf("extend: %w", err)
		}
		if base != nil {
			c.extend(base, tc.Extend.DisabledRules)
		}
	}

	if depth == 0 {
		for _, r := range c.Rules {
			if err := r.validate(); err != nil {
				return nil, err
			}
		}
		for _, id := range targetOrder {
			r := c.rule(id)
			if r == nil {
				return nil, configErr("[[allowlists]] target rule ID %q does not exist", id)
			}
			r.Allowlists = append(r.Allowlists, targeted[id]...)
		}
	}
	return c, nil
}

func (c *Config) rule(id string) *Rule {
	for _, r := range c.Rules {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// extend merges base into c as gitleaks' Config.extend does: c's rules
// override base's non-zero fields, keywords, tags and allowlists are
// appended, and the rules end up sorted by id.
func (c *Config) extend(base *Config, disabled []string) {
	off := make(map[string]bool, len(disabled))
	for _, id := range disabled {
		off[id] = true
	}
	for _, br := range base.Rules {
		if off[br.ID] {
			continue
		}
		cur := c.rule(br.ID)
		if cur == nil {
			c.Rules = append(c.Rules, br)
			continue
		}
		m := *br
		if cur.Description != "" {
			m.Description = cur.Description
		}
		if cur.Entropy != 0 {
			m.Entropy = cur.Entropy
		}
		if cur.SecretGroup != 0 {
			m.SecretGroup = cur.SecretGroup
		}
		if cur.Regex != nil {
			m.Regex = cur.Regex
		}
		if cur.Path != nil {
			m.Path = cur.Path
		}
		m.Tags = append(append([]string(nil), br.Tags...), cur.Tags...)
		m.Keywords = append(append([]string(nil), br.Keywords...), cur.Keywords...)
		m.Allowlists = append(append([]*Allowlist(nil), br.Allowlists...), cur.Allowlists...)
		*cur = m
	}
	c.Allowlists = append(c.Allowlists, base.Allowlists...)
	sort.SliceStable(c.Rules, func(i, j int) bool { return c.Rules[i].ID < c.Rules[j].ID })
}

func (r *Rule) validate() error {
	if strings.TrimSpace(r.ID) == "" {
		return configErr("rule id is missing or empty (description %q)", r.Description)
	}
	if r.Regex == nil && r.Path == nil {
		return configErr("%s: both regex and path are empty, this rule will have no effect", r.ID)
	}
	if r.Regex != nil && r.SecretGroup > r.Regex.NumSubexp() {
		return configErr("%s: invalid regex secret group %d, max regex secret group %d", r.ID, r.SecretGroup, r.Regex.NumSubexp())
	}
	return nil
}
