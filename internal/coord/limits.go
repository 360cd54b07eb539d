package coord

// Limits bounds what a single request or tenant can make a backend store.
// Backends take a Limits at construction; the zero value of a field means
// "use the default" (see WithDefaults).
type Limits struct {
	MaxChildrenPerSplit int   // children of one SplitReplace
	MaxSpawnedPerShard  int   // shards ever derived from one shard
	MaxKeySize          int   // bytes in a range bound or cursor key
	MaxTokenSize        int   // bytes in a cursor token
	MaxMetadataSize     int   // bytes of shard metadata
	MaxReasonSize       int   // bytes in a park or failure reason
	MaxInitialShards    int   // shards in one RegisterShards manifest
	MaxShardsPerTenant  int64 // shard records existing per tenant
	MaxShardsGlobal     int64 // shard records existing in the backend
}

// Default limits.
const (
	DefaultMaxChildrenPerSplit       = 256
	DefaultMaxSpawnedPerShard        = 1024
	DefaultMaxKeySize                = 4 << 10
	DefaultMaxTokenSize              = 64 << 10
	DefaultMaxMetadataSize           = 64 << 10
	DefaultMaxReasonSize             = 1 << 10
	DefaultMaxInitialShards          = 10000
	DefaultMaxShardsPerTenant  int64 = 1_000_000
	DefaultMaxShardsGlobal     int64 = 100_000_000
)

// Record-level bounds that are part of the storage format, not configurable.
const (
	MaxShardOps = 16 // idempotency log entries per shard
	MaxRunOps   = 8  // idempotency log entries per run
)

// DefaultLimits returns the default limits.
func DefaultLimits() Limits { return Limits{}.WithDefaults() }

// WithDefaults returns l with every non-positive field replaced by its default.
func (l Limits) WithDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def64 := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxChildrenPerSplit, DefaultMaxChildrenPerSplit)
	def(&l.MaxSpawnedPerShard, DefaultMaxSpawnedPerShard)
	def(&l.MaxKeySize, DefaultMaxKeySize)
	def(&l.MaxTokenSize, DefaultMaxTokenSize)
	def(&l.MaxMetadataSize, DefaultMaxMetadataSize)
	def(&l.MaxReasonSize, DefaultMaxReasonSize)
	def(&l.MaxInitialShards, DefaultMaxInitialShards)
	def64(&l.MaxShardsPerTenant, DefaultMaxShardsPerTenant)
	def64(&l.MaxShardsGlobal, DefaultMaxShardsGlobal)
	return l
}

// CheckShardCaps reports a *ShardLimitError if creating delta shard records
// would exceed either cap, given the current tenant and global counts. The
// tenant cap is checked first.
func (l Limits) CheckShardCaps(tenantCount, globalCount, delta int64) error {
	if tenantCount+delta > l.MaxShardsPerTenant {
		return &ShardLimitError{Scope: ScopeTenant, Current: tenantCount, Delta: delta, Cap: l.MaxShardsPerTenant}
	}
	if globalCount+delta > l.MaxShardsGlobal {
		return &ShardLimitError{Scope: ScopeGlobal, Current: globalCount, Delta: delta, Cap: l.MaxShardsGlobal}
	}
	return nil
}

func (l Limits) check(name string, v, max int) error {
	if v > max {
		return &LimitError{Limit: name, Value: int64(v), Max: int64(max)}
	}
	return nil
}

func (l Limits) checkCursor(c Cursor) error {
	if err := l.check(LimitKeySize, len(c.Key), l.MaxKeySize); err != nil {
		return err
	}
	return l.check(LimitTokenSize, len(c.Token), l.MaxTokenSize)
}
