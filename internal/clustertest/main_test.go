package clustertest

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

// memberEnv makes the test binary an etcd member instead of running
// tests: etcd's own server main, linked from the go.etcd.io/etcd/server/v3
// module go.mod pins, so the cluster runs the etcd version ghost ships
// with, each member a separate process that can be killed and stopped.
const memberEnv = "GHOST_CLUSTERTEST_ETCD_MEMBER"

func TestMain(m *testing.M) {
	if os.Getenv(memberEnv) == "1" {
		// etcdmain.Main parses its flags from the arguments and exits the
		// process itself when the server stops.
		etcdmain.Main(append([]string{"etcd"}, os.Args[1:]...))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// config is one run's shape. The presets are the short run .ci/run makes
// and the long one README.md documents; GHOST_CLUSTER_* variables
// override single settings.
type config struct {
	Name          string
	Seed          uint64
	Load          time.Duration // how long clients push while faults run
	Clients       int           // pushing clients
	Repos         int           // repositories the clients share
	Faults        int           // faults injected during Load
	CompactLayers int           // the nodes' --compact-layers
	AlertWait     time.Duration // how long after healing every alert may take
	SecretRate    float64       // fraction of commits that plant a secret
	Dir           string        // work directory to keep; empty: a temporary one
}

func presetConfig(name string) (config, error) {
	switch name {
	case "short":
		return config{Name: name, Load: 80 * time.Second, Clients: 6, Repos: 3, Faults: 12,
			CompactLayers: 5, AlertWait: 2 * time.Minute, SecretRate: 0.3}, nil
	case "long":
		return config{Name: name, Load: 10 * time.Minute, Clients: 15, Repos: 3, Faults: 65,
			CompactLayers: 10, AlertWait: 2 * time.Minute, SecretRate: 0.25}, nil
	}
	return config{}, fmt.Errorf("GHOST_CLUSTER=%q: want short or long", name)
}

// loadConfig reads GHOST_CLUSTER (the preset) and the overrides. ok is
// false when GHOST_CLUSTER is unset: the test does not run.
func loadConfig() (cfg config, ok bool, err error) {
	name := os.Getenv("GHOST_CLUSTER")
	if name == "" {
		return config{}, false, nil
	}
	if cfg, err = presetConfig(name); err != nil {
		return cfg, true, err
	}
	cfg.Seed = uint64(time.Now().UnixNano() % 1_000_000_000)
	cfg.Dir = os.Getenv("GHOST_CLUSTER_DIR")
	for _, o := range []struct {
		env string
		set func(string) error
	}{
		{"GHOST_CLUSTER_SEED", func(v string) (err error) { cfg.Seed, err = strconv.ParseUint(v, 10, 64); return }},
		{"GHOST_CLUSTER_LOAD", func(v string) (err error) { cfg.Load, err = time.ParseDuration(v); return }},
		{"GHOST_CLUSTER_CLIENTS", func(v string) (err error) { cfg.Clients, err = strconv.Atoi(v); return }},
		{"GHOST_CLUSTER_REPOS", func(v string) (err error) { cfg.Repos, err = strconv.Atoi(v); return }},
		{"GHOST_CLUSTER_FAULTS", func(v string) (err error) { cfg.Faults, err = strconv.Atoi(v); return }},
		{"GHOST_CLUSTER_COMPACT_LAYERS", func(v string) (err error) { cfg.CompactLayers, err = strconv.Atoi(v); return }},
		{"GHOST_CLUSTER_ALERT_WAIT", func(v string) (err error) { cfg.AlertWait, err = time.ParseDuration(v); return }},
	} {
		if v := os.Getenv(o.env); v != "" {
			if err := o.set(v); err != nil {
				return cfg, true, fmt.Errorf("%s=%q: %w", o.env, v, err)
			}
		}
	}
	if cfg.Clients < 1 || cfg.Repos < 1 || cfg.Faults < 0 || cfg.Load <= 0 || cfg.CompactLayers < 0 || cfg.AlertWait <= 0 {
		return cfg, true, fmt.Errorf("GHOST_CLUSTER settings out of range: %+v", cfg)
	}
	return cfg, true, nil
}
