// Package brokerconfig reads the configuration file of the broker daemon
// (`gpubroker serve --config FILE`): store DSN, refresh schedule, clouds,
// regions and concurrency, with file:line:col errors. The daemon itself
// lives in package broker.
package config

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// DefaultRefreshSchedule refreshes prices every six hours, on the hour: AWS
// and Azure publish price changes at most a few times a day, and a refresh of
// all default regions costs a few hundred API calls (docs/providers.md).
const DefaultRefreshSchedule = "0 */6 * * *"

// Config is the daemon's configuration, from a YAML file and flags.
type Config struct {
	// DB is the store DSN; empty means the default SQLite file.
	DB string
	// Refresh configures the scheduled catalog refresh.
	Refresh RefreshConfig
	// ShutdownGrace is how long a running job may finish after a stop
	// signal before it is cancelled.
	ShutdownGrace time.Duration
	// DBPasswordFile holds the PostgreSQL password (first line), so it
	// need not be in DB; PGPASSWORD and ~/.pgpass work too.
	DBPasswordFile string
	// LeaseTTL is the leader lease (1s to 10m).
	LeaseTTL time.Duration
	// CatalogReload is how often every replica re-reads prices and the
	// stored plan from the store (1s to 1h).
	CatalogReload time.Duration
	// Retention bounds how long price history and events are kept.
	Retention RetentionConfig
	// Fleet configures the fleet reconciler (fleet.go).
	Fleet FleetConfig
	// Reports configures Slack reports and alerts (reports.go).
	Reports ReportsConfig
	// Endpoints overrides the clouds' public endpoints ("endpoints:"); the
	// GPUBROKER_*_ENDPOINT / _URL variables fill what the file leaves out.
	Endpoints providers.Endpoints
}

// RetentionConfig says how long the growing tables keep rows; 0 keeps them
// for ever.
type RetentionConfig struct {
	PriceHistory time.Duration
	Events       time.Duration
	// Agents: an agent's instance record after its last heartbeat.
	Agents time.Duration
	// LaunchIntents: retired launch intents (each slot's newest is kept).
	LaunchIntents time.Duration
}

// Defaults of the settings above.
const (
	DefaultLeaseTTL      = 15 * time.Second
	DefaultCatalogReload = 30 * time.Second
	// DefaultPriceHistoryRetention keeps a year of price changes: enough
	// for seasonal comparisons, bounded for a table that grows with every
	// refresh.
	DefaultPriceHistoryRetention = 365 * 24 * time.Hour
	// DefaultEventRetention keeps 90 days of events. It must exceed how
	// long an agent may hold a report in its spool, or a late re-delivery
	// would no longer be recognised as a repeat.
	DefaultEventRetention = 90 * 24 * time.Hour
	// DefaultAgentRetention forgets an agent a month after its last
	// heartbeat: its instance is long gone, and the dashboard's and API's
	// instance lists stop growing with every launch ever made.
	DefaultAgentRetention = 30 * 24 * time.Hour
	// DefaultLaunchIntentRetention keeps retired launch intents a month
	// for audit (each slot id's newest stays regardless).
	DefaultLaunchIntentRetention = 30 * 24 * time.Hour
)

// RefreshConfig configures the scheduled catalog refresh.
type RefreshConfig struct {
	// Schedule is a cron expression (5 fields, or @every 1h, @hourly, ...).
	Schedule string
	// OnStart runs a refresh as soon as the daemon starts.
	OnStart bool
	// Clouds to refresh; empty means all.
	Clouds []pricing.Cloud
	// Regions are region names or globs (see refresh.ResolveRegions).
	Regions []string
	// Concurrency bounds the regions each cloud fetches at once.
	Concurrency int
	// FetchTimeout bounds one cloud's fetch of all its regions.
	FetchTimeout time.Duration
}

// DefaultConfig is the configuration with nothing set.
func DefaultConfig() Config {
	return Config{
		ShutdownGrace: 30 * time.Second,
		LeaseTTL:      DefaultLeaseTTL,
		CatalogReload: DefaultCatalogReload,
		Retention: RetentionConfig{PriceHistory: DefaultPriceHistoryRetention, Events: DefaultEventRetention,
			Agents: DefaultAgentRetention, LaunchIntents: DefaultLaunchIntentRetention},
		Refresh: RefreshConfig{Schedule: DefaultRefreshSchedule, OnStart: true, Concurrency: 4,
			FetchTimeout: 15 * time.Minute},
	}
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("bad configuration")

// maxConfigSize bounds a configuration file; anything larger is a mistake.
const maxConfigSize = 1 << 20

// ParseConfig reads a YAML configuration file over DefaultConfig. name is
// used in errors, which read "name:line:col: what is wrong; what is right".
//
//	db: postgres://gpubroker@db.internal/gpubroker
//	db_password_file: /run/secrets/gpubroker-db
//	shutdown_grace: 30s
//	lease_ttl: 15s
//	catalog_reload: 30s
//	retention:
//	  price_history: 365d
//	  events: 90d
//	  agents: 30d
//	  launch_intents: 30d
//	refresh:
//	  schedule: "0 */6 * * *"
//	  on_start: true
//	  clouds: [aws, gcp]
//	  regions: ["us-*", europe-west4]
//	  concurrency: 4
//	  fetch_timeout: 15m
//	endpoints:
//	  gcp_compute: https://compute.googleapis.internal
//	  azure_retail_prices: https://proxy.internal/azure-prices
func ParseConfig(name string, data []byte) (Config, error) {
	cfg := DefaultConfig()
	if len(data) > maxConfigSize {
		return cfg, fmt.Errorf("%w: %s: %d bytes; a configuration file is at most %d", ErrConfig, name, len(data), maxConfigSize)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return cfg, yamlError(name, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return cfg, nil // empty file: all defaults
	}
	p := &parser{name: name, src: data}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return cfg, nil
	}
	err := p.mapping(root, "", map[string]func(*yaml.Node) error{
		"db":               func(n *yaml.Node) error { return p.str(n, "db", &cfg.DB) },
		"db_password_file": func(n *yaml.Node) error { return p.str(n, "db_password_file", &cfg.DBPasswordFile) },
		"shutdown_grace":   func(n *yaml.Node) error { return p.duration(n, "shutdown_grace", &cfg.ShutdownGrace) },
		"lease_ttl": func(n *yaml.Node) error {
			return p.bounded(n, "lease_ttl", time.Second, 10*time.Minute, &cfg.LeaseTTL)
		},
		"catalog_reload": func(n *yaml.Node) error {
			return p.bounded(n, "catalog_reload", time.Second, time.Hour, &cfg.CatalogReload)
		},
		"retention": func(n *yaml.Node) error {
			r := &cfg.Retention
			return p.mapping(n, "retention", map[string]func(*yaml.Node) error{
				"price_history": func(n *yaml.Node) error { return p.retention(n, "retention.price_history", &r.PriceHistory) },
				"events":        func(n *yaml.Node) error { return p.retention(n, "retention.events", &r.Events) },
				"agents":        func(n *yaml.Node) error { return p.retention(n, "retention.agents", &r.Agents) },
				"launch_intents": func(n *yaml.Node) error {
					return p.retention(n, "retention.launch_intents", &r.LaunchIntents)
				},
			})
		},
		"fleet":   func(n *yaml.Node) error { return p.fleet(n, &cfg.Fleet) },
		"reports": func(n *yaml.Node) error { return p.reports(n, &cfg.Reports) },
		"refresh": func(n *yaml.Node) error {
			r := &cfg.Refresh
			return p.mapping(n, "refresh", map[string]func(*yaml.Node) error{
				"schedule":      func(n *yaml.Node) error { return p.schedule(n, &r.Schedule) },
				"on_start":      func(n *yaml.Node) error { return p.boolean(n, "refresh.on_start", &r.OnStart) },
				"clouds":        func(n *yaml.Node) error { return p.clouds(n, &r.Clouds) },
				"regions":       func(n *yaml.Node) error { return p.strings(n, "refresh.regions", &r.Regions) },
				"concurrency":   func(n *yaml.Node) error { return p.positive(n, "refresh.concurrency", &r.Concurrency) },
				"fetch_timeout": func(n *yaml.Node) error { return p.duration(n, "refresh.fetch_timeout", &r.FetchTimeout) },
			})
		},
		"endpoints": func(n *yaml.Node) error {
			fields := map[string]func(*yaml.Node) error{}
			for i, dst := range cfg.Endpoints.Fields() {
				key := providers.EndpointKeys[i]
				fields[key] = func(n *yaml.Node) error {
					if err := p.str(n, "endpoints."+key, dst); err != nil {
						return err
					}
					if err := providers.CheckEndpoint(*dst); err != nil {
						return p.errorf(n, "endpoints.%s: %v", key, err)
					}
					return nil
				}
			}
			return p.mapping(n, "endpoints", fields)
		},
	})
	return cfg, err
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns the YAML library's "yaml: line N: ..." into name:N:1.
func yamlError(name string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%w: %s:%s:1: %s", ErrConfig, name, m[1], m[2])
	}
	return fmt.Errorf("%w: %s:1:1: %s", ErrConfig, name, strings.TrimPrefix(msg, "yaml: "))
}

type parser struct {
	name string
	src  []byte // the file, for positions inside block scalars
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%w: %s:%d:%d: %s", ErrConfig, p.name, n.Line, n.Column, fmt.Sprintf(format, args...))
}

func (p *parser) mapping(n *yaml.Node, path string, fields map[string]func(*yaml.Node) error) error {
	where := path
	if where == "" {
		where = "the top level"
	}
	if n.Kind == yaml.AliasNode {
		return p.errorf(n, "%s: aliases are not supported; write the value out", where)
	}
	if n.Kind != yaml.MappingNode {
		return p.errorf(n, "%s must be a mapping of keys to values", where)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		fn, ok := fields[k.Value]
		if !ok || k.Kind != yaml.ScalarNode {
			return p.errorf(k, "unknown key %q in %s; known keys: %s", k.Value, where, known(fields))
		}
		if seen[k.Value] {
			return p.errorf(k, "key %q appears twice in %s", k.Value, where)
		}
		seen[k.Value] = true
		if v.Kind == yaml.AliasNode {
			return p.errorf(v, "%s: aliases are not supported; write the value out", k.Value)
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	return nil
}

func known(fields map[string]func(*yaml.Node) error) string {
	var ks []string
	for k := range fields {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

func (p *parser) scalar(n *yaml.Node, key, want string) error {
	if n.Kind != yaml.ScalarNode {
		return p.errorf(n, "%s must be %s", key, want)
	}
	return nil
}

func (p *parser) str(n *yaml.Node, key string, dst *string) error {
	if err := p.scalar(n, key, "a string"); err != nil {
		return err
	}
	*dst = n.Value
	return nil
}

func (p *parser) boolean(n *yaml.Node, key string, dst *bool) error {
	if err := p.scalar(n, key, "true or false"); err != nil {
		return err
	}
	switch n.Value {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return p.errorf(n, "%s %q: want true or false", key, n.Value)
	}
	return nil
}

func (p *parser) positive(n *yaml.Node, key string, dst *int) error {
	if err := p.scalar(n, key, "a whole number"); err != nil {
		return err
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < 1 || v > 1024 {
		return p.errorf(n, "%s %q: want a whole number from 1 to 1024", key, n.Value)
	}
	*dst = v
	return nil
}

func (p *parser) duration(n *yaml.Node, key string, dst *time.Duration) error {
	if err := p.scalar(n, key, "a duration such as 30s or 10m"); err != nil {
		return err
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil || d <= 0 {
		return p.errorf(n, "%s %q: want a positive duration such as 30s or 10m", key, n.Value)
	}
	*dst = d
	return nil
}

// bounded reads a duration between lo and hi.
func (p *parser) bounded(n *yaml.Node, key string, lo, hi time.Duration, dst *time.Duration) error {
	var d time.Duration
	if err := p.duration(n, key, &d); err != nil {
		return err
	}
	if err := CheckDuration(key, d, lo, hi); err != nil {
		return p.errorf(n, "%v", err)
	}
	*dst = d
	return nil
}

// CheckDuration checks that d is between lo and hi, for flags and the file
// alike.
func CheckDuration(key string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return fmt.Errorf("%s %s: want a duration from %s to %s", key, d, lo, hi)
	}
	return nil
}

// retention reads a retention: a duration with an optional day unit
// ("90d", "2160h"), or 0 to keep rows for ever.
func (p *parser) retention(n *yaml.Node, key string, dst *time.Duration) error {
	if err := p.scalar(n, key, "a duration such as 90d or 2160h, or 0"); err != nil {
		return err
	}
	d, err := ParseRetention(n.Value)
	if err != nil {
		return p.errorf(n, "%s: %v", key, err)
	}
	*dst = d
	return nil
}

// ParseRetention reads "90d", "2160h" or "0" (keep for ever).
func ParseRetention(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err == nil && n >= 1 && n <= 36500 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d >= time.Hour {
		return d, nil
	}
	return 0, fmt.Errorf("%q: want whole days such as 90d, a duration of at least 1h such as 2160h, or 0 to keep for ever", s)
}

func (p *parser) strings(n *yaml.Node, key string, dst *[]string) error {
	if n.Kind != yaml.SequenceNode {
		return p.errorf(n, "%s must be a list, e.g. [\"us-*\", europe-west4]", key)
	}
	out := make([]string, 0, len(n.Content))
	for _, e := range n.Content {
		if e.Kind != yaml.ScalarNode || e.Value == "" {
			return p.errorf(e, "%s: each entry must be a non-empty string", key)
		}
		out = append(out, e.Value)
	}
	*dst = out
	return nil
}

func (p *parser) clouds(n *yaml.Node, dst *[]pricing.Cloud) error {
	var names []string
	if err := p.strings(n, "refresh.clouds", &names); err != nil {
		return err
	}
	var out []pricing.Cloud
	for i, s := range names {
		c, err := pricing.ParseCloud(s)
		if err != nil {
			return p.errorf(n.Content[i], "refresh.clouds: %v", err)
		}
		out = append(out, c)
	}
	*dst = out
	return nil
}

func (p *parser) schedule(n *yaml.Node, dst *string) error {
	if err := p.scalar(n, "refresh.schedule", "a cron expression"); err != nil {
		return err
	}
	if err := ValidateSchedule(n.Value); err != nil {
		return p.errorf(n, "refresh.schedule: %v", err)
	}
	*dst = n.Value
	return nil
}

// ValidateSchedule checks a cron expression the way the daemon will run it.
func ValidateSchedule(spec string) error {
	if _, err := parseSchedule(spec); err != nil {
		return fmt.Errorf("%q is not a cron schedule (%v); want 5 fields such as %q, or @every 6h, @hourly, @daily", spec, err, DefaultRefreshSchedule)
	}
	return nil
}

// parseSchedule is cron.ParseStandard, with any panic inside the cron
// parser turned into an error: the spec comes from outside.
func parseSchedule(spec string) (s cron.Schedule, err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("unparseable: %v", p)
		}
	}()
	return cron.ParseStandard(spec)
}
