package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Flag annotations: the environment variable of a flag, and why that
// variable's value was refused.
const (
	envAnnotation    = "ghost_env"
	envErrAnnotation = "ghost_env_error"
)

// StringVar defines a string flag whose default is the environment
// variable env when set (see Env), else def. Flags win over the
// environment, which wins over built-in defaults.
func StringVar(fs *pflag.FlagSet, p *string, name, env, def, usage string) {
	fs.StringVar(p, name, def, usage)
	bindEnv(fs, name, env)
}

// BoolVar is StringVar for a boolean flag; the variable takes the values
// strconv.ParseBool accepts.
func BoolVar(fs *pflag.FlagSet, p *bool, name, env string, def bool, usage string) {
	fs.BoolVar(p, name, def, usage)
	bindEnv(fs, name, env)
}

// IntVar is StringVar for an int flag.
func IntVar(fs *pflag.FlagSet, p *int, name, env string, def int, usage string) {
	fs.IntVar(p, name, def, usage)
	bindEnv(fs, name, env)
}

// Int64Var is StringVar for an int64 flag.
func Int64Var(fs *pflag.FlagSet, p *int64, name, env string, def int64, usage string) {
	fs.Int64Var(p, name, def, usage)
	bindEnv(fs, name, env)
}

// DurationVar is StringVar for a duration flag in time.ParseDuration
// syntax (10m, 168h). A value without a unit is refused in ghost's own
// words (ParseDuration).
func DurationVar(fs *pflag.FlagSet, p *time.Duration, name, env string, def time.Duration, usage string) {
	Duration(fs, p, name, def, usage)
	bindEnv(fs, name, env)
}

// Duration defines a duration flag without an environment variable, for
// per-call options; it parses as DurationVar does.
func Duration(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*durationValue)(p), name, usage)
}

// BytesVar is StringVar for a size flag: bytes, or a number with a binary
// unit (64MiB, 2G); see ParseBytes. Its default shows the same way.
func BytesVar(fs *pflag.FlagSet, p *int64, name, env string, def int64, usage string) {
	Bytes(fs, p, name, def, usage)
	bindEnv(fs, name, env)
}

// Bytes defines a size flag without an environment variable.
func Bytes(fs *pflag.FlagSet, p *int64, name string, def int64, usage string) {
	*p = def
	fs.Var((*bytesValue)(p), name, usage)
}

// durationValue is a duration flag whose errors are in ghost's words,
// not time's ("time: missing unit in duration").
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return FormatDuration(time.Duration(*d)) }

func (d *durationValue) Type() string { return "duration" }

// FormatDuration writes a duration as people write it and as flags take
// it back (ParseDuration): the units that are not zero, "1m", "30s",
// "1h30m", "168h", "1m0.5s" rather than time's "1m0s" or "168h0m0s";
// "0" for zero, and time's own form below a second ("500ms"). It is
// what FormatBytes is to sizes.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	if d < 0 {
		if d == math.MinInt64 {
			return d.String()
		}
		return "-" + FormatDuration(-d)
	}
	if d < time.Second {
		return d.String()
	}
	var b strings.Builder
	if h := d / time.Hour; h > 0 {
		b.WriteString(strconv.FormatInt(int64(h), 10) + "h")
	}
	if m := d % time.Hour / time.Minute; m > 0 {
		b.WriteString(strconv.FormatInt(int64(m), 10) + "m")
	}
	if rest := d % time.Minute; rest > 0 {
		b.WriteString(rest.String())
	}
	return b.String()
}

// ParseDuration parses a duration as time.ParseDuration does, so both
// "1m" and time's "1m0s" are taken, with errors a user can act on: "5"
// needs a unit, "soon" is no duration. "0" alone is zero, the value
// that switches a limit off.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "0" {
		return 0, nil
	}
	v, err := time.ParseDuration(t)
	if err == nil {
		return v, nil
	}
	if _, nerr := strconv.ParseFloat(t, 64); nerr == nil {
		return 0, fmt.Errorf("%q has no unit: write a duration such as %ss, %sm or %sh", s, t, t, t)
	}
	return 0, fmt.Errorf("%q is not a duration: write a number and a unit, such as 30s, 5m or 1h30m", s)
}

// Var is StringVar for a flag of any type; value holds the built-in
// default.
func Var(fs *pflag.FlagSet, value pflag.Value, name, env, usage string) {
	fs.Var(value, name, usage)
	bindEnv(fs, name, env)
}

// bindEnv names env in the flag's help, records it, and makes its value
// the flag's default. A value the flag refuses is kept for CheckEnv to
// report, since only a flag given on the command line makes it harmless.
func bindEnv(fs *pflag.FlagSet, name, env string) {
	f := fs.Lookup(name)
	f.Usage += " (env " + env + ")"
	fs.SetAnnotation(name, envAnnotation, []string{env})
	v := Env(env, "")
	if v == "" {
		return
	}
	if err := f.Value.Set(v); err != nil {
		fs.SetAnnotation(name, envErrAnnotation, []string{fmt.Sprintf("%s=%q: %v", env, v, err)})
		return
	}
	f.DefValue = f.Value.String()
}

// EnvOf returns the environment variable bound to f, or "" if none is.
func EnvOf(f *pflag.Flag) string {
	if v := f.Annotations[envAnnotation]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// CheckEnv reports the first environment variable of fs whose value its
// flag refused, unless the flag was set on the command line. Call it
// after parsing.
func CheckEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if msg := f.Annotations[envErrAnnotation]; err == nil && len(msg) > 0 && !f.Changed {
			err = fmt.Errorf("invalid environment: %s", msg[0])
		}
	})
	return err
}

// listValue is a comma-separated list flag. Unlike pflag's StringSlice it
// trims spaces around items, drops empty ones, and each use replaces the
// list, so --etcd-endpoints "" clears what the environment set.
type listValue []string

func (l *listValue) Set(s string) error {
	*l = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

func (l *listValue) String() string { return strings.Join(*l, ",") }

func (l *listValue) Type() string { return "strings" }
