package access

import (
	"errors"
	"testing"
)

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		level            Level
		anonymous, write bool
		want             error
	}{
		{None, true, false, ErrUnauthenticated},
		{None, false, false, ErrNotFound},
		{Read, true, false, nil},
		{Read, false, false, nil},
		{Write, false, false, nil},
		{None, true, true, ErrUnauthenticated},
		// An anonymous push is refused as unauthenticated even where a
		// level would allow it: a push always names its pusher.
		{Write, true, true, ErrUnauthenticated},
		{Read, true, true, ErrUnauthenticated},
		{None, false, true, ErrNotFound},
		{Read, false, true, ErrForbidden},
		{Write, false, true, nil},
	} {
		if got := Decide(tc.level, tc.anonymous, tc.write); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("Decide(%v, anonymous %v, write %v) = %v, want %v", tc.level, tc.anonymous, tc.write, got, tc.want)
		}
	}
}

func TestLevelsAreOrdered(t *testing.T) {
	if !(None < Read && Read < Write) {
		t.Fatal("levels out of order")
	}
	for l, want := range map[Level]string{None: "none", Read: "read", Write: "write", 9: "unknown"} {
		if got := l.String(); got != want {
			t.Errorf("Level(%d).String() = %q, want %q", l, got, want)
		}
	}
}
