package web

import (
	"reflect"
	"testing"
)

// TestDiffLines: inside a hunk a line is what its first character says
// (a deleted "-- x" is a deletion, an added "+++ x" an addition), and
// lines are numbered on each side from the hunk's header; outside hunks
// and in a combined diff's, lines are classed by prefix and unnumbered.
func TestDiffLines(t *testing.T) {
	cases := []struct {
		name  string
		patch string
		want  []diffLine
	}{
		{"hunks", "@@ -3,4 +3,4 @@ func f()\n ctx\n--- x\n+++ y\n\\ No newline at end of file\n@@ -10 +10,2 @@\n-a\n+b\n+c\n", []diffLine{
			{Class: "hunk", Text: "@@ -3,4 +3,4 @@ func f()"},
			{Text: " ctx", Old: 3, New: 3},
			{Class: "del", Text: "--- x", Old: 4},
			{Class: "add", Text: "+++ y", New: 4},
			{Class: "meta", Text: "\\ No newline at end of file"},
			{Class: "hunk", Text: "@@ -10 +10,2 @@"},
			{Class: "del", Text: "-a", Old: 10},
			{Class: "add", Text: "+b", New: 10},
			{Class: "add", Text: "+c", New: 11},
		}},
		{"new file", "@@ -0,0 +1 @@\n+x\n", []diffLine{
			{Class: "hunk", Text: "@@ -0,0 +1 @@"},
			{Class: "add", Text: "+x", New: 1},
		}},
		{"commit headers", "diff --git a/f b/f\nindex 1..2 100644\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\ndiff --git a/g b/g\n--- a/g\n", []diffLine{
			{Class: "file", Text: "diff --git a/f b/f"},
			{Class: "meta", Text: "index 1..2 100644"},
			{Class: "meta", Text: "--- a/f"},
			{Class: "meta", Text: "+++ b/f"},
			{Class: "hunk", Text: "@@ -1 +1 @@"},
			{Class: "del", Text: "-x", Old: 1},
			{Class: "add", Text: "+y", New: 1},
			{Class: "file", Text: "diff --git a/g b/g"},
			{Class: "meta", Text: "--- a/g"},
		}},
		{"combined", "@@@ -1,2 -1,2 +1,3 @@@\n  a\n+ b\n", []diffLine{
			{Class: "hunk", Text: "@@@ -1,2 -1,2 +1,3 @@@"},
			{Text: "  a"},
			{Class: "add", Text: "+ b"},
		}},
		{"bad header", "@@ -x +1 @@\n+a\n", []diffLine{
			{Class: "hunk", Text: "@@ -x +1 @@"},
			{Class: "add", Text: "+a"},
		}},
	}
	for _, c := range cases {
		if got := diffLines(c.patch); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}
