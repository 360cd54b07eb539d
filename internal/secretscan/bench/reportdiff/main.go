// Command reportdiff compares a ghost JSON report with a gitleaks JSON
// report of the same history, for bench/compare.sh
// (docs/adr/0036-scanner-on-real-histories.md). It prints one line:
//
//	strict ghost=N gitleaks=M missed=A extra=B loose ... secret ...
//
// Strict keys are (rule, commit, file, line): where gitleaks reports a
// finding. Loose keys are (rule, file, secret): the same secret of the
// same rule in the same file, at any commit or line. Secret keys are
// (file, secret): the same secret in the same file under any rule. ghost's report
// holds no secret, only its HMAC-SHA256 under the scan's fingerprint key
// (empty unless -key-file is given); gitleaks' secrets are hashed the
// same way to compare. With -missed FILE the keys gitleaks has and ghost
// lacks are written there (secrets as their HMAC), one a line.
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
)

type finding struct {
	RuleID     string
	Commit     string
	File       string
	StartLine  int
	Secret     string
	SecretHMAC string
}

func main() {
	keyFile := flag.String("key-file", "", "the fingerprint key ghost scanned with")
	missed := flag.String("missed", "", "write the keys gitleaks has and ghost lacks here")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: reportdiff [-key-file F] [-missed F] GHOST.json GITLEAKS.json")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), *keyFile, *missed); err != nil {
		fmt.Fprintln(os.Stderr, "reportdiff:", err)
		os.Exit(1)
	}
}

func load(path string) ([]finding, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var fs []finding
	if err := json.Unmarshal(data, &fs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fs, nil
}

func run(ghostPath, gitleaksPath, keyFile, missedPath string) error {
	var key []byte
	if keyFile != "" {
		var err error
		if key, err = os.ReadFile(keyFile); err != nil {
			return err
		}
	}
	gh, err := load(ghostPath)
	if err != nil {
		return err
	}
	gl, err := load(gitleaksPath)
	if err != nil {
		return err
	}
	hash := func(s string) string {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(s))
		return hex.EncodeToString(m.Sum(nil))
	}
	strict := func(f finding) string { return fmt.Sprintf("%s %s %s:%d", f.RuleID, f.Commit, f.File, f.StartLine) }
	loose := func(f finding, secret string) string { return fmt.Sprintf("%s %s %s", f.RuleID, f.File, secret) }
	anyRule := func(f finding, secret string) string { return fmt.Sprintf("%s %s", f.File, secret) }
	gs, gls, gas := map[string]bool{}, map[string]bool{}, map[string]bool{}
	ts, tls, tas := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, f := range gh {
		gs[strict(f)] = true
		gls[loose(f, f.SecretHMAC)] = true
		gas[anyRule(f, f.SecretHMAC)] = true
	}
	for _, f := range gl {
		ts[strict(f)] = true
		tls[loose(f, hash(f.Secret))] = true
		tas[anyRule(f, hash(f.Secret))] = true
	}
	var lines []string
	count := func(a, b map[string]bool, tag string) (only int) {
		for k := range a {
			if !b[k] {
				only++
				if tag != "" {
					lines = append(lines, tag+" "+k)
				}
			}
		}
		return only
	}
	sm, se := count(ts, gs, "strict"), count(gs, ts, "")
	lm, le := count(tls, gls, "loose"), count(gls, tls, "")
	am, ae := count(tas, gas, "secret"), count(gas, tas, "")
	fmt.Printf("strict ghost=%d gitleaks=%d missed=%d extra=%d loose ghost=%d gitleaks=%d missed=%d extra=%d secret ghost=%d gitleaks=%d missed=%d extra=%d\n",
		len(gs), len(ts), sm, se, len(gls), len(tls), lm, le, len(gas), len(tas), am, ae)
	if missedPath != "" {
		slices.Sort(lines)
		var b []byte
		for _, l := range lines {
			b = append(b, l+"\n"...)
		}
		return os.WriteFile(missedPath, b, 0o644)
	}
	return nil
}
