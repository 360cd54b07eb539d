package coord

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func sampleRun() Run {
	return Run{
		Tenant: goldenTenant, ID: 7, State: RunActive,
		Config:    RunConfig{LeaseDuration: 30 * time.Second, Cursor: CursorStrictlyIncreasing, MaxRetries: 3},
		CreatedAt: 1000, UpdatedAt: 2000, RootShards: 3,
		Ops: []OpRecord{{ID: 1, Hash: Digest{1}}, {ID: 2, Hash: Digest{2}, Result: 9}},
	}
}

func sampleShard() Shard {
	return Shard{
		Tenant: goldenTenant, Run: 7, ID: DeriveShardID(7, 3, 9, SplitKindResidual, 0), Parent: 3,
		Start: []byte("m"), End: []byte("t"), Metadata: []byte("md"), State: ShardActive,
		Cursor: Cursor{HasKey: true, Key: []byte("p"), Token: []byte("tok")},
		Fence:  4, Owner: 42, Deadline: 5000, Attempts: 2,
		Children:  []ShardID{DeriveShardID(7, 9, 1, SplitKindResidual, 0)},
		CreatedAt: 1000, UpdatedAt: 3000,
		Ops: []OpRecord{{ID: 11, Hash: Digest{3}, Result: 4}},
	}
}

// sampleRecords returns valid records in a variety of states.
func sampleRuns() []Run {
	done := sampleRun()
	done.State, done.CompletedAt = RunDone, 3000
	failed := sampleRun()
	failed.State, failed.CompletedAt, failed.FailReason = RunFailed, 3000, "boom"
	initializing := sampleRun()
	initializing.State, initializing.RootShards, initializing.Ops = RunInitializing, 0, nil
	summarized := done
	summarized.Summary = RunSummary{Total: 9, Done: 5, Split: 4}
	return []Run{sampleRun(), done, failed, initializing, summarized}
}

func sampleShards() []Shard {
	root := sampleShard()
	root.ID, root.Parent, root.Start, root.End = 3, 0, nil, nil
	parked := sampleShard()
	parked.State, parked.ParkReason, parked.Owner, parked.Deadline = ShardParked, "poison", 0, 0
	split := sampleShard()
	split.State, split.Owner, split.Deadline = ShardSplit, 0, 0
	split.Children = append(split.Children, DeriveShardID(7, 9, 2, SplitKindReplace, 0))
	emptyKey := sampleShard()
	emptyKey.Start, emptyKey.Cursor = nil, Cursor{HasKey: true}
	emptyKey.ID, emptyKey.Parent = 4, 0
	return []Shard{sampleShard(), root, parked, split, emptyKey}
}

func TestEncodingRoundTrip(t *testing.T) {
	for _, r := range sampleRuns() {
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary(%v run): %v", r.State, err)
		}
		var got Run
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("UnmarshalBinary(%v run): %v", r.State, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("run round trip:\n got %+v\nwant %+v", got, r)
		}
	}
	for _, s := range sampleShards() {
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary(%v shard): %v", s.State, err)
		}
		var got Shard
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("UnmarshalBinary(%v shard): %v", s.State, err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("shard round trip:\n got %+v\nwant %+v", got, s)
		}
		// The decoded record does not alias the input.
		b[len(b)-1] ^= 0xFF
		for i := range b {
			b[i] = 0
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("decoded shard aliases its input")
		}
	}
}

func TestEncodingRejects(t *testing.T) {
	s := sampleShard()
	good, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r := sampleRun()
	goodRun, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(b []byte, f func([]byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	cases := []struct {
		name string
		data []byte
		run  bool
	}{
		{"empty", nil, false},
		{"trailing byte", append(append([]byte(nil), good...), 0), false},
		{"truncated", good[:len(good)-1], false},
		{"bad magic", mutate(good, func(b []byte) []byte { b[0] = 'x'; return b }), false},
		{"run magic for shard", goodRun, false},
		{"future version", mutate(good, func(b []byte) []byte { b[2] = 2; return b }), false},
		{"run trailing byte", append(append([]byte(nil), goodRun...), 0), true},
		{"run future version", mutate(goodRun, func(b []byte) []byte { b[2] = 3; return b }), true},
		{"run version 2 without summary", mutate(goodRun, func(b []byte) []byte { b[2] = 2; return append(b, 0, 0, 0, 0, 0) }), true},
		{"run truncated", goodRun[:len(goodRun)-3], true},
		{"shard magic for run", good, true},
		{"huge length", append([]byte{'g', 'S', 1}, bytes.Repeat([]byte{0xFF}, 40)...), false},
	}
	for _, tc := range cases {
		var err error
		if tc.run {
			var got Run
			err = got.UnmarshalBinary(tc.data)
		} else {
			var got Shard
			err = got.UnmarshalBinary(tc.data)
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", tc.name, err)
		}
	}
	// Invalid records are neither encoded nor decoded.
	bad := sampleShard()
	bad.Fence = 0
	if _, err := bad.MarshalBinary(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("MarshalBinary of an invalid shard: %v", err)
	}
}

func TestValidate(t *testing.T) {
	shardCases := []struct {
		name string
		mod  func(*Shard)
	}{
		{"zero id", func(s *Shard) { s.ID = 0 }},
		{"zero run", func(s *Shard) { s.Run = 0 }},
		{"bad state", func(s *Shard) { s.State = 9 }},
		{"derived without parent", func(s *Shard) { s.Parent = 0 }},
		{"root with parent", func(s *Shard) { s.ID = 5 }},
		{"own parent", func(s *Shard) { s.Parent = s.ID }},
		{"empty range", func(s *Shard) { s.End = s.Start }},
		{"zero fence", func(s *Shard) { s.Fence = 0 }},
		{"owner without deadline", func(s *Shard) { s.Deadline = 0 }},
		{"deadline without owner", func(s *Shard) { s.Owner = 0 }},
		{"done with lease", func(s *Shard) { s.State = ShardDone }},
		{"parked without reason", func(s *Shard) { s.State, s.Owner, s.Deadline = ShardParked, 0, 0 }},
		{"reason without park", func(s *Shard) { s.ParkReason = "x" }},
		{"split with one child", func(s *Shard) { s.State, s.Owner, s.Deadline = ShardSplit, 0, 0 }},
		{"cursor below range", func(s *Shard) { s.Cursor.Key = []byte("a") }},
		{"cursor at end", func(s *Shard) { s.Cursor.Key = []byte("t") }},
		{"cursor key without flag", func(s *Shard) { s.Cursor.HasKey = false }},
		{"root child id", func(s *Shard) { s.Children = []ShardID{5} }},
		{"duplicate child", func(s *Shard) { s.Children = append(s.Children, s.Children[0]) }},
		{"zero created", func(s *Shard) { s.CreatedAt = 0 }},
		{"updated before created", func(s *Shard) { s.UpdatedAt = s.CreatedAt - 1 }},
		{"lease deadline not after updated", func(s *Shard) { s.UpdatedAt = s.Deadline }},
		{"long op log", func(s *Shard) {
			s.Ops = nil
			for i := 0; i <= MaxShardOps; i++ {
				s.Ops = append(s.Ops, OpRecord{ID: OpID(i + 1)})
			}
		}},
		{"duplicate op", func(s *Shard) { s.Ops = append(s.Ops, s.Ops[0]) }},
		{"zero op", func(s *Shard) { s.Ops = append(s.Ops, OpRecord{}) }},
	}
	for _, s := range sampleShards() {
		if err := s.Validate(); err != nil {
			t.Fatalf("sample %v shard invalid: %v", s.State, err)
		}
	}
	for _, tc := range shardCases {
		s := sampleShard()
		tc.mod(&s)
		if err := s.Validate(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("shard %s: Validate = %v, want ErrCorrupt", tc.name, err)
		}
	}
	runCases := []struct {
		name string
		mod  func(*Run)
	}{
		{"zero id", func(r *Run) { r.ID = 0 }},
		{"bad state", func(r *Run) { r.State = 0 }},
		{"zero lease", func(r *Run) { r.Config.LeaseDuration = 0 }},
		{"bad cursor mode", func(r *Run) { r.Config.Cursor = 7 }},
		{"active without shards", func(r *Run) { r.RootShards = 0 }},
		{"initializing with shards", func(r *Run) { r.State = RunInitializing }},
		{"terminal without completed_at", func(r *Run) { r.State = RunCancelled }},
		{"completed_at while active", func(r *Run) { r.CompletedAt = 5 }},
		{"failed without reason", func(r *Run) { r.State, r.CompletedAt = RunFailed, 5 }},
		{"reason without failure", func(r *Run) { r.FailReason = "x" }},
		{"long op log", func(r *Run) {
			for i := 0; i < MaxRunOps; i++ {
				r.Ops = append(r.Ops, OpRecord{ID: OpID(100 + i)})
			}
		}},
		{"duplicate op", func(r *Run) { r.Ops = append(r.Ops, r.Ops[0]) }},
		{"summary while active", func(r *Run) { r.Summary = RunSummary{Total: 1, Done: 1} }},
		{"summary not adding up", func(r *Run) {
			r.State, r.CompletedAt, r.Summary = RunDone, 5000, RunSummary{Total: 2, Done: 1}
		}},
	}
	for _, tc := range runCases {
		r := sampleRun()
		tc.mod(&r)
		if err := r.Validate(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("run %s: Validate = %v, want ErrCorrupt", tc.name, err)
		}
	}
}

func TestLimitsDefaults(t *testing.T) {
	d := DefaultLimits()
	if d.MaxChildrenPerSplit != 256 || d.MaxSpawnedPerShard != 1024 || d.MaxKeySize != 4096 ||
		d.MaxTokenSize != 65536 || d.MaxInitialShards != 10000 || d.MaxShardsPerTenant <= 0 || d.MaxShardsGlobal <= 0 {
		t.Fatalf("defaults %+v", d)
	}
	l := Limits{MaxKeySize: 8}.WithDefaults()
	if l.MaxKeySize != 8 || l.MaxTokenSize != DefaultMaxTokenSize {
		t.Fatalf("WithDefaults overrode a set field or missed a default: %+v", l)
	}
	err := Limits{MaxShardsPerTenant: 10, MaxShardsGlobal: 20}.CheckShardCaps(9, 5, 2)
	var sle *ShardLimitError
	if !errors.As(err, &sle) || *sle != (ShardLimitError{Scope: ScopeTenant, Current: 9, Delta: 2, Cap: 10}) {
		t.Fatalf("tenant cap: %v", err)
	}
	err = Limits{MaxShardsPerTenant: 10, MaxShardsGlobal: 20}.CheckShardCaps(1, 19, 2)
	if !errors.As(err, &sle) || sle.Scope != ScopeGlobal || !errors.Is(err, ErrLimitExceeded) {
		t.Fatalf("global cap: %v", err)
	}
	if err := (Limits{MaxShardsPerTenant: 10, MaxShardsGlobal: 20}).CheckShardCaps(8, 18, 2); err != nil {
		t.Fatalf("reaching the caps exactly: %v", err)
	}
}

func FuzzDecodeShard(f *testing.F) {
	for _, s := range sampleShards() {
		b, err := s.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Shard
		if err := s.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// Whatever decodes is valid and re-encodes to an equivalent record.
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded shard does not re-encode: %v", err)
		}
		var again Shard
		if err := again.UnmarshalBinary(b); err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("re-encoded shard differs: %v", err)
		}
	})
}

func FuzzDecodeRun(f *testing.F) {
	for _, r := range sampleRuns() {
		b, err := r.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Run
		if err := r.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded run does not re-encode: %v", err)
		}
		var again Run
		if err := again.UnmarshalBinary(b); err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("re-encoded run differs: %v", err)
		}
	})
}
