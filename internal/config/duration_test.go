package config

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestDurationsPrintAsPeopleWriteThem: durations print without zero
// units ("1m", not "1m0s"), flags and ParseDuration take both forms back,
// and a flag's help shows its default that way.
func TestDurationsPrintAsPeopleWriteThem(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                               "0",
		500 * time.Millisecond:          "500ms",
		time.Second:                     "1s",
		30 * time.Second:                "30s",
		time.Minute:                     "1m",
		90 * time.Second:                "1m30s",
		time.Hour:                       "1h",
		90 * time.Minute:                "1h30m",
		time.Hour + 5*time.Second:       "1h5s",
		168 * time.Hour:                 "168h",
		time.Minute + time.Second/2:     "1m500ms",
		time.Hour + time.Millisecond:    "1h1ms",
		-90 * time.Second:               "-1m30s",
		time.Duration(math.MaxInt64):    "2562047h47m16.854775807s",
		time.Duration(math.MinInt64):    time.Duration(math.MinInt64).String(),
		2*time.Hour + 3*time.Nanosecond: "2h3ns",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := ParseDuration(FormatDuration(d)); err != nil || back != d {
			t.Errorf("ParseDuration(FormatDuration(%v)) = %v, %v", d, back, err)
		}
		if back, err := ParseDuration(d.String()); err != nil || back != d {
			t.Errorf("ParseDuration(%q) = %v, %v; time's own form must still parse", d.String(), back, err)
		}
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var a, b, z time.Duration
	Duration(fs, &a, "a", time.Minute, "a")
	Duration(fs, &b, "b", 168*time.Hour, "b")
	Duration(fs, &z, "z", 0, "z")
	help := fs.FlagUsages()
	for _, want := range []string{"(default 1m)\n", "(default 168h)\n"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "m0s") || strings.Contains(help, "default 0") {
		t.Errorf("help shows time's form or a zero default:\n%s", help)
	}
	if err := fs.Parse([]string{"--a", "1m0s", "--b", "2h"}); err != nil || a != time.Minute || b != 2*time.Hour {
		t.Fatalf("parse: %v %v %v", a, b, err)
	}
}

// FuzzFormatDuration: whatever the duration, ParseDuration reads back
// exactly what FormatDuration wrote.
func FuzzFormatDuration(f *testing.F) {
	for _, d := range []int64{0, 1, 999, int64(time.Second), int64(90 * time.Minute), -int64(time.Hour), math.MaxInt64} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		d := time.Duration(n)
		s := FormatDuration(d)
		back, err := ParseDuration(s)
		if err != nil || back != d {
			t.Fatalf("ParseDuration(FormatDuration(%d) = %q) = %v, %v", n, s, back, err)
		}
	})
}
