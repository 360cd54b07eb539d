package pushprotect

import (
	"fmt"
	"strings"

	"github.com/ghost-scm/ghost/internal/alerts"
)

// BypassOption is the push option that lets a push with secrets through:
// git push -o secret-scanning.bypass=<reason>.
const BypassOption = "secret-scanning.bypass"

// optionNamespace is the prefix of every push option this package owns.
// An option in it that Check does not know is refused rather than
// ignored, so that a mistyped bypass says so instead of looking like a
// push blocked for no reason.
const optionNamespace = "secret-scanning."

// Limits on push options, enforced by ParseOptions. git sends each
// option in one pkt-line, so a single one is already below 64 KiB; these
// keep a hostile client from sending very many.
const (
	MaxOptions     = 100
	MaxOptionBytes = 1024
)

// PushOptions are the push options push protection understands.
type PushOptions struct {
	// Bypass is the reason for letting secrets through, "" if none.
	Bypass alerts.BypassReason
}

// OptionError is an invalid push option. The push must be refused with
// its message: the pusher asked for something that cannot be done.
type OptionError struct {
	Option string // as sent (truncated)
	Msg    string
}

func (e *OptionError) Error() string {
	if e.Option == "" {
		return "invalid push options: " + e.Msg
	}
	return fmt.Sprintf("invalid push option %q: %s", e.Option, e.Msg)
}

// ParseOptions reads the push options of a push. Options outside the
// secret-scanning. namespace belong to others and are ignored. Within
// it, only secret-scanning.bypass=<reason> exists, with reason
// false_positive, used_in_tests or will_fix_later; it may be repeated
// with the same reason, not with different ones.
func ParseOptions(opts []string) (PushOptions, error) {
	var po PushOptions
	if len(opts) > MaxOptions {
		return po, &OptionError{Msg: fmt.Sprintf("%d options, at most %d are accepted", len(opts), MaxOptions)}
	}
	for _, o := range opts {
		if len(o) > MaxOptionBytes {
			return po, &OptionError{Option: o[:64] + "...", Msg: fmt.Sprintf("longer than %d bytes", MaxOptionBytes)}
		}
		if !strings.HasPrefix(strings.ToLower(o), optionNamespace) {
			continue
		}
		name, value, hasValue := strings.Cut(o, "=")
		if name != BypassOption {
			return po, &OptionError{Option: o, Msg: "unknown option; the only one is " + BypassOption + "=<reason>"}
		}
		r := alerts.BypassReason(value)
		switch r {
		case alerts.BypassFalsePositive, alerts.BypassUsedInTests, alerts.BypassWillFixLater:
		default:
			msg := fmt.Sprintf("reason %q: want %s, %s or %s", value, alerts.BypassFalsePositive, alerts.BypassUsedInTests, alerts.BypassWillFixLater)
			if !hasValue {
				msg = fmt.Sprintf("needs a reason: %s=%s|%s|%s", BypassOption, alerts.BypassFalsePositive, alerts.BypassUsedInTests, alerts.BypassWillFixLater)
			}
			return po, &OptionError{Option: o, Msg: msg}
		}
		if po.Bypass != "" && po.Bypass != r {
			return po, &OptionError{Option: o, Msg: fmt.Sprintf("conflicts with the earlier reason %s", po.Bypass)}
		}
		po.Bypass = r
	}
	return po, nil
}
