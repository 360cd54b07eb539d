package pulls

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// The keys of docs/design.md §2.3 (docs/adr/0118-pull-request-records.md):
//
//	meta/pulls/<repoID>/<n>                          the record, the truth
//	meta/pullnext/<repoID>                           the next number, by compare-and-swap
//	meta/pulllist/<repoID>/<open|closed>/<inv>,...   a listing key per state
//	meta/pullheads/<headRepoID>/<h>/<repoID>,...     an open pull request's head
//	meta/pullrepos/<headRepoID>                      that repository has been a head
//
// <inv> is 9999999999 minus the number, ten digits, so that a LIST reads
// the newest first; <h> is the first 40 hex digits of the sha256 of the
// head's branch name, so a key's length does not depend on it.
const (
	pullsPrefix = "meta/pulls/"
	nextPrefix  = "meta/pullnext/"
	listPrefix  = "meta/pulllist/"
	headsPrefix = "meta/pullheads/"
	reposPrefix = "meta/pullrepos/"
)

// headRepoKey marks a repository some pull request's head has been in,
// so that a push to any other costs one GET to learn it has none
// (docs/adr/0117-pull-request-refs.md).
func headRepoKey(headRepoID string) string { return reposPrefix + headRepoID }

// MaxNumber is the largest pull-request number: numbers have ten digits
// in the listing keys.
const MaxNumber = 9_999_999_999

func recordKey(repoID string, n uint64) string {
	return pullsPrefix + repoID + "/" + strconv.FormatUint(n, 10)
}

func nextKey(repoID string) string { return nextPrefix + repoID }

// listClass is the list a state shows in: open, or closed (merged ones
// too, as GitHub's state=closed).
func listClass(s State) string {
	if s == Open {
		return "open"
	}
	return "closed"
}

func listStatePrefix(repoID, class string) string {
	return listPrefix + repoID + "/" + class + "/"
}

func inv(n uint64) string { return fmt.Sprintf("%010d", MaxNumber-n) }

func headHash(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return hex.EncodeToString(sum[:20])
}

func headsRefPrefix(headRepoID, ref string) string {
	return headsPrefix + headRepoID + "/" + headHash(ref) + "/"
}

// stateKey names the write that put a pull request into a list: its
// generation and nonce, and when it was written (Unix ms), so that a key
// of a write that never landed can be told apart and, a day later,
// removed.
type stateKey struct {
	number uint64
	gen    uint64
	nonce  string
	at     int64
}

func (k stateKey) listKey(repoID, class string) string {
	return listStatePrefix(repoID, class) + inv(k.number) + "," + k.suffix()
}

func (k stateKey) headKey(headRepoID, ref, repoID string) string {
	return headsRefPrefix(headRepoID, ref) + repoID + "," + strconv.FormatUint(k.number, 10) + "," + k.suffix()
}

func (k stateKey) suffix() string {
	return strconv.FormatUint(k.gen, 10) + "," + k.nonce + "," + strconv.FormatInt(k.at, 10)
}

// parseListKey reads the part of a listing key after its state prefix.
func parseListKey(rest string) (stateKey, bool) {
	f := strings.Split(rest, ",")
	if len(f) != 4 || len(f[0]) != 10 {
		return stateKey{}, false
	}
	i, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil || i > MaxNumber {
		return stateKey{}, false
	}
	k, ok := parseSuffix(f[1:])
	k.number = MaxNumber - i
	return k, ok && k.number > 0
}

// parseHeadKey reads the part of a head key after its branch prefix.
func parseHeadKey(rest string) (repoID string, k stateKey, ok bool) {
	f := strings.Split(rest, ",")
	if len(f) != 5 {
		return "", stateKey{}, false
	}
	n, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil || n == 0 || n > MaxNumber {
		return "", stateKey{}, false
	}
	k, ok = parseSuffix(f[2:])
	k.number = n
	return f[0], k, ok && f[0] != ""
}

func parseSuffix(f []string) (stateKey, bool) {
	gen, err1 := strconv.ParseUint(f[0], 10, 64)
	at, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || f[1] == "" {
		return stateKey{}, false
	}
	return stateKey{gen: gen, nonce: f[1], at: at}, true
}
