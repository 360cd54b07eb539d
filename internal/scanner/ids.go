package scanner

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/ghost-scm/ghost/internal/coord"
)

// Kind says what a run scans.
type Kind string

// Run kinds.
const (
	// KindPush scans the blobs of one pushed layer (its pack's objects).
	KindPush Kind = "push"
	// KindFull scans every blob of the repository as of its seq.
	KindFull Kind = "full"
)

func (k Kind) valid() bool { return k == KindPush || k == KindFull }

// Spec identifies a run: the same Spec always names the same coord run.
type Spec struct {
	// Tenant is the repository's owner, as package meta and alerts name it.
	Tenant string
	// RepoID is the repository's log id.
	RepoID string
	Kind   Kind
	// Seq is the layer a push run scans, or the seq a full run scans at
	// (the repository's head when the run was asked for).
	Seq uint64
}

func (s Spec) String() string {
	return fmt.Sprintf("%s run of %s/%s at seq %d", s.Kind, s.Tenant, s.RepoID, s.Seq)
}

func (s Spec) check() error {
	if s.Tenant == "" || s.RepoID == "" || !s.Kind.valid() {
		return fmt.Errorf("%w: incomplete run spec %+v", ErrInvalid, s)
	}
	if s.Kind == KindPush && s.Seq == 0 {
		return fmt.Errorf("%w: a push run needs the layer's seq", ErrInvalid)
	}
	return nil
}

// RunID is the coord run id of s: a hash of the spec, so that creating the
// run again from any node is the same run (coord run ids are global).
func (s Spec) RunID() coord.RunID {
	v := hash64("ghost/scanner/run", s.Tenant, s.RepoID, string(s.Kind), strconv.FormatUint(s.Seq, 10))
	return coord.RunID(v)
}

// TenantID is the coord tenant of a ghost tenant name.
func TenantID(tenant string) coord.TenantID {
	return coord.TenantID(sha256.Sum256([]byte("ghost/scanner/tenant\x00" + tenant)))
}

// op derives the op id of one logical mutation from its parts. Retrying
// the same mutation derives the same id (coord's idempotency).
func op(parts ...string) coord.OpID {
	return coord.OpID(hash64(append([]string{"ghost/scanner/op"}, parts...)...))
}

func hash64(parts ...string) uint64 {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	v := binary.BigEndian.Uint64(h.Sum(nil)) &^ (1 << 63)
	if v == 0 {
		v = 1
	}
	return v
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }
