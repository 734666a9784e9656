package config

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"go.yaml.in/yaml/v3"
)

// FleetConfig configures the fleet reconciler (docs/fleet.md). Without a
// fleet section nothing is reconciled; with one, the mode is dry-run unless
// it says `mode: apply`.
type FleetConfig struct {
	// Enabled is true when the file has a fleet section.
	Enabled bool
	// Mode is "dry-run" (default) or "apply".
	Mode string
	// Name is the value of the gpubroker-fleet tag (default "gpubroker").
	Name     string
	Interval time.Duration
	// BrokerURL is the address agents report to (goes into user data).
	BrokerURL         string
	MaxInstances      int
	LaunchesPerMinute int
	OrphanGrace       time.Duration
	BootTimeout       time.Duration
	HeartbeatTimeout  time.Duration
	// UnavailableBackoff is the first block of a pool after a capacity
	// error or a preemption.
	UnavailableBackoff time.Duration
	// Hedge turns live spot hedging of inference services on (default
	// true); HedgeTick is its decision period, ReadyDelay how long a new
	// replica takes to serve, HedgeMaxZones the most spot pools one
	// service spreads over (zero: the defaults in docs/fleet.md).
	Hedge         bool
	HedgeTick     time.Duration
	ReadyDelay    time.Duration
	HedgeMaxZones int
	// ReplaceSlowHosts asks for the replacement of every host flagged
	// slow_host (a benchmark below 70% of its type's median).
	ReplaceSlowHosts bool
	// Commands maps a workload to its own command, started after the agent.
	Commands map[string]string
	// Training configures the live training stage (fleet.training).
	Training FleetTraining
	// Clouds holds the launch configuration per cloud (aws, gcp, azure; and
	// the test-only "fake").
	Clouds map[string]FleetCloud
}

// FleetTraining are the live training stage's settings (docs/fleet.md,
// "Training jobs, live"); zero values take the defaults.
type FleetTraining struct {
	// Tick is how often a job's spot policy decides (1s to 1h).
	Tick time.Duration
	// MoveMargin is the hysteresis of moving between spot pools (0 to 10).
	MoveMargin float64
	// PriceHalfLife smooths the spot prices a move is judged on (1m to 7
	// days).
	PriceHalfLife time.Duration
	// Boot is the time from a launch to the job starting, on top of each
	// workload's restart_overhead (0 to 2h; default 0).
	Boot time.Duration
}

// FleetCloud is one cloud's launch configuration. Which keys a cloud needs
// is in requiredKeys; the compute adapters read the ones they use.
type FleetCloud struct {
	MaxInstances      int
	LaunchesPerMinute int
	Regions           []string
	// Image: AMI id (AWS), image self-link or family (GCP), image id or
	// URN (Azure).
	Image string
	// Subnet: subnet id (AWS), subnetwork (GCP), subnet resource id (Azure).
	Subnet         string
	Network        string
	SecurityGroups []string
	// Identity: instance profile (AWS), service account email (GCP), user
	// assigned identity resource id (Azure).
	Identity       string
	Project        string
	Subscription   string
	ResourceGroup  string
	Endpoint       string
	SSHKey         string
	UserData       *template.Template
	UserDataSource string // "inline" or the file's path

	// Test-only fake cloud (cloud "fake"): which cloud it pretends to be,
	// the traces that drive its spot capacity, and where its metadata
	// service listens.
	FakeCloud      string
	Traces         string
	Seed           uint64
	SpotScale      int
	TimeScale      int
	LaunchLatency  time.Duration
	NoticeLead     time.Duration
	MetadataListen string
	RunUserData    bool
}

// FleetModes are the accepted modes.
var FleetModes = []string{"dry-run", "apply"}

// requiredKeys are the keys each cloud's launch configuration must set.
var requiredKeys = map[string][]string{
	"aws":   {"image", "subnet"},
	"gcp":   {"project", "image"},
	"azure": {"subscription", "resource_group", "image", "subnet"},
	"fake":  {},
}

// UserDataFields are the fields a user data template may use.
var UserDataFields = []string{"BrokerURL", "Token", "Fleet", "Slot", "Workload", "Cloud", "Region", "Zone", "InstanceType", "Capacity", "Command"}

var tmplField = regexp.MustCompile(`\{\{[-\s]*(?:if\s+|with\s+)?\.([A-Za-z_][A-Za-z0-9_]*)`)
var tmplLine = regexp.MustCompile(`^template: [^:]*:(\d+):(?:(\d+):)? (.*)$`)

func (p *parser) fleet(n *yaml.Node, dst *FleetConfig) error {
	dst.Enabled = true
	dst.Mode = "dry-run"
	dst.Hedge = true
	return p.mapping(n, "fleet", map[string]func(*yaml.Node) error{
		"mode": func(n *yaml.Node) error {
			if err := p.str(n, "fleet.mode", &dst.Mode); err != nil {
				return err
			}
			if !slices.Contains(FleetModes, dst.Mode) {
				return p.errorf(n, "fleet.mode %q: want dry-run (record what would be done) or apply (launch and terminate instances)", dst.Mode)
			}
			return nil
		},
		"name": func(n *yaml.Node) error {
			if err := p.str(n, "fleet.name", &dst.Name); err != nil {
				return err
			}
			if !labelRE.MatchString(dst.Name) {
				return p.errorf(n, "fleet.name %q: want 1-63 lower-case letters, digits and dashes, starting with a letter (it is a tag on every instance, and GCP labels allow no more)", dst.Name)
			}
			return nil
		},
		"interval":      func(n *yaml.Node) error { return p.duration(n, "fleet.interval", &dst.Interval) },
		"broker_url":    func(n *yaml.Node) error { return p.url(n, "fleet.broker_url", &dst.BrokerURL) },
		"max_instances": func(n *yaml.Node) error { return p.count(n, "fleet.max_instances", &dst.MaxInstances) },
		"launches_per_minute": func(n *yaml.Node) error {
			return p.count(n, "fleet.launches_per_minute", &dst.LaunchesPerMinute)
		},
		"orphan_grace":      func(n *yaml.Node) error { return p.duration(n, "fleet.orphan_grace", &dst.OrphanGrace) },
		"boot_timeout":      func(n *yaml.Node) error { return p.duration(n, "fleet.boot_timeout", &dst.BootTimeout) },
		"heartbeat_timeout": func(n *yaml.Node) error { return p.duration(n, "fleet.heartbeat_timeout", &dst.HeartbeatTimeout) },
		"unavailable_backoff": func(n *yaml.Node) error {
			return p.duration(n, "fleet.unavailable_backoff", &dst.UnavailableBackoff)
		},
		"hedge": func(n *yaml.Node) error { return p.boolean(n, "fleet.hedge", &dst.Hedge) },
		"replace_slow_hosts": func(n *yaml.Node) error {
			return p.boolean(n, "fleet.replace_slow_hosts", &dst.ReplaceSlowHosts)
		},
		"hedge_tick": func(n *yaml.Node) error {
			return p.bounded(n, "fleet.hedge_tick", time.Second, time.Hour, &dst.HedgeTick)
		},
		"ready_delay": func(n *yaml.Node) error {
			return p.bounded(n, "fleet.ready_delay", time.Second, 24*time.Hour, &dst.ReadyDelay)
		},
		"hedge_max_zones": func(n *yaml.Node) error {
			if err := p.count(n, "fleet.hedge_max_zones", &dst.HedgeMaxZones); err != nil {
				return err
			}
			if dst.HedgeMaxZones > 64 {
				return p.errorf(n, "fleet.hedge_max_zones %d: want 1 to 64 spot pools per service", dst.HedgeMaxZones)
			}
			return nil
		},
		"training": func(n *yaml.Node) error {
			t := &dst.Training
			return p.mapping(n, "fleet.training", map[string]func(*yaml.Node) error{
				"tick": func(n *yaml.Node) error {
					return p.bounded(n, "fleet.training.tick", time.Second, time.Hour, &t.Tick)
				},
				"boot": func(n *yaml.Node) error {
					return p.bounded(n, "fleet.training.boot", 0, 2*time.Hour, &t.Boot)
				},
				"price_half_life": func(n *yaml.Node) error {
					return p.bounded(n, "fleet.training.price_half_life", time.Minute, 7*24*time.Hour, &t.PriceHalfLife)
				},
				"move_margin": func(n *yaml.Node) error {
					if err := p.scalar(n, "fleet.training.move_margin", "a fraction such as 0.2"); err != nil {
						return err
					}
					v, err := strconv.ParseFloat(strings.TrimSuffix(n.Value, "%"), 64)
					if strings.HasSuffix(n.Value, "%") {
						v /= 100
					}
					if err != nil || !(v > 0 && v <= 10) {
						return p.errorf(n, "fleet.training.move_margin %q: want a fraction above 0 and at most 10, such as 0.2 or 20%% (a move must save 20%% more than it costs)", n.Value)
					}
					t.MoveMargin = v
					return nil
				},
			})
		},
		"commands": func(n *yaml.Node) error {
			if n.Kind != yaml.MappingNode {
				return p.errorf(n, "fleet.commands must map workload names to commands, e.g. {train: \"python train.py\"}")
			}
			dst.Commands = map[string]string{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if v.Kind != yaml.ScalarNode || v.Value == "" {
					return p.errorf(v, "fleet.commands.%s must be a non-empty command string", k.Value)
				}
				dst.Commands[k.Value] = v.Value
			}
			return nil
		},
		"clouds": func(n *yaml.Node) error {
			if n.Kind != yaml.MappingNode {
				return p.errorf(n, "fleet.clouds must map a cloud (aws, gcp, azure) to its launch configuration")
			}
			dst.Clouds = map[string]FleetCloud{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				name := strings.ToLower(k.Value)
				if _, ok := requiredKeys[name]; !ok {
					return p.errorf(k, "fleet.clouds: unknown cloud %q; want aws, gcp or azure (or fake, for tests)", k.Value)
				}
				if _, dup := dst.Clouds[name]; dup {
					return p.errorf(k, "fleet.clouds: %s appears twice", name)
				}
				var c FleetCloud
				if err := p.fleetCloud(v, name, &c); err != nil {
					return err
				}
				dst.Clouds[name] = c
			}
			return nil
		},
	})
}

var labelRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

func (p *parser) fleetCloud(n *yaml.Node, cloud string, c *FleetCloud) error {
	path := "fleet.clouds." + cloud
	set := map[string]bool{}
	str := func(key string, dst *string) func(*yaml.Node) error {
		return func(n *yaml.Node) error {
			set[key] = true
			if err := p.str(n, path+"."+key, dst); err != nil {
				return err
			}
			if strings.TrimSpace(*dst) == "" {
				return p.errorf(n, "%s.%s is empty; remove the key or give a value", path, key)
			}
			return nil
		}
	}
	fields := map[string]func(*yaml.Node) error{
		"max_instances":       func(n *yaml.Node) error { return p.count(n, path+".max_instances", &c.MaxInstances) },
		"launches_per_minute": func(n *yaml.Node) error { return p.count(n, path+".launches_per_minute", &c.LaunchesPerMinute) },
		"regions":             func(n *yaml.Node) error { return p.strings(n, path+".regions", &c.Regions) },
		"image":               str("image", &c.Image),
		"subnet":              str("subnet", &c.Subnet),
		"network":             str("network", &c.Network),
		"security_groups":     func(n *yaml.Node) error { return p.strings(n, path+".security_groups", &c.SecurityGroups) },
		"identity":            str("identity", &c.Identity),
		"project":             str("project", &c.Project),
		"subscription":        str("subscription", &c.Subscription),
		"resource_group":      str("resource_group", &c.ResourceGroup),
		"endpoint":            func(n *yaml.Node) error { return p.url(n, path+".endpoint", &c.Endpoint) },
		"ssh_key":             str("ssh_key", &c.SSHKey),
		"user_data": func(n *yaml.Node) error {
			if c.UserData != nil {
				return p.errorf(n, "%s: give user_data or user_data_file, not both", path)
			}
			var s string
			if err := p.str(n, path+".user_data", &s); err != nil {
				return err
			}
			t, err := p.userData(n, path+".user_data", s, contentLine(n))
			c.UserData, c.UserDataSource = t, "inline"
			return err
		},
		"user_data_file": func(n *yaml.Node) error {
			if c.UserData != nil {
				return p.errorf(n, "%s: give user_data or user_data_file, not both", path)
			}
			var f string
			if err := p.str(n, path+".user_data_file", &f); err != nil {
				return err
			}
			if !filepath.IsAbs(f) {
				f = filepath.Join(filepath.Dir(p.name), f)
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return p.errorf(n, "%s: %v", path+".user_data_file", err)
			}
			t, err := (&parser{name: f, src: b}).userData(&yaml.Node{Line: 1, Column: 1}, "user data", string(b), 0)
			c.UserData, c.UserDataSource = t, f
			return err
		},
	}
	if cloud == "fake" {
		fields["pretend"] = str("pretend", &c.FakeCloud)
		fields["traces"] = str("traces", &c.Traces)
		fields["seed"] = func(n *yaml.Node) error {
			if err := p.scalar(n, path+".seed", "a whole number"); err != nil {
				return err
			}
			v, err := strconv.ParseUint(n.Value, 10, 64)
			if err != nil {
				return p.errorf(n, "%s.seed %q: want a whole number", path, n.Value)
			}
			c.Seed = v
			return nil
		}
		fields["spot_scale"] = func(n *yaml.Node) error { return p.count(n, path+".spot_scale", &c.SpotScale) }
		fields["time_scale"] = func(n *yaml.Node) error { return p.count(n, path+".time_scale", &c.TimeScale) }
		fields["launch_latency"] = func(n *yaml.Node) error { return p.duration(n, path+".launch_latency", &c.LaunchLatency) }
		fields["notice_lead"] = func(n *yaml.Node) error { return p.duration(n, path+".notice_lead", &c.NoticeLead) }
		fields["metadata_listen"] = str("metadata_listen", &c.MetadataListen)
		fields["run_user_data"] = func(n *yaml.Node) error { return p.boolean(n, path+".run_user_data", &c.RunUserData) }
	}
	if err := p.mapping(n, path, fields); err != nil {
		return err
	}
	for _, k := range requiredKeys[cloud] {
		if !set[k] {
			return p.errorf(n, "%s: %s is required (see docs/fleet.md for what each cloud needs)", path, k)
		}
	}
	if cloud == "fake" && c.FakeCloud != "" && !slices.Contains([]string{"aws", "gcp", "azure"}, c.FakeCloud) {
		return p.errorf(n, "%s.pretend %q: want aws, gcp or azure", path, c.FakeCloud)
	}
	return nil
}

// contentLine is the line offset of a block scalar's first content line
// relative to the node (1 for `|` blocks, 0 for plain or quoted strings).
func contentLine(n *yaml.Node) int {
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return 1
	}
	return 0
}

// userData parses a user data template and checks the fields it uses, with
// errors at the template's own line (and, for unknown fields, column) in
// the file. offset is 1 for block scalars (content starts a line below the
// key), 0 for a whole file or a one-line string.
func (p *parser) userData(n *yaml.Node, key, text string, offset int) (*template.Template, error) {
	at := func(line, col int) *yaml.Node {
		x := *n
		x.Line = n.Line + offset + line
		x.Column = p.indent(x.Line) + col + 1
		if offset == 0 && line == 0 {
			x.Column = n.Column + col
		}
		return &x
	}
	t, err := template.New(key).Option("missingkey=error").Parse(text)
	if err != nil {
		if m := tmplLine.FindStringSubmatch(err.Error()); m != nil {
			l, _ := strconv.Atoi(m[1])
			return nil, p.errorf(at(l-1, 0), "%s: template error: %s", key, m[3])
		}
		return nil, p.errorf(n, "%s: template error: %v", key, err)
	}
	for i, line := range strings.Split(text, "\n") {
		for _, m := range tmplField.FindAllStringSubmatchIndex(line, -1) {
			if f := line[m[2]:m[3]]; !slices.Contains(UserDataFields, f) {
				return nil, p.errorf(at(i, m[0]), "%s: unknown field .%s; a user data template may use %s", key, f, strings.Join(UserDataFields, ", "))
			}
		}
	}
	return t, nil
}

// indent is the number of leading spaces of line (1-based) of the file.
func (p *parser) indent(line int) int {
	lines := strings.Split(string(p.src), "\n")
	if line < 1 || line > len(lines) {
		return 0
	}
	l := lines[line-1]
	return len(l) - len(strings.TrimLeft(l, " "))
}

func (p *parser) count(n *yaml.Node, key string, dst *int) error {
	if err := p.scalar(n, key, "a whole number"); err != nil {
		return err
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < 1 || v > 1_000_000 {
		return p.errorf(n, "%s %q: want a whole number from 1 to 1000000", key, n.Value)
	}
	*dst = v
	return nil
}

func (p *parser) url(n *yaml.Node, key string, dst *string) error {
	if err := p.str(n, key, dst); err != nil {
		return err
	}
	if !strings.HasPrefix(*dst, "http://") && !strings.HasPrefix(*dst, "https://") {
		return p.errorf(n, "%s %q: want an http:// or https:// URL", key, *dst)
	}
	return nil
}
