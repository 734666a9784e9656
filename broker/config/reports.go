package config

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time_zone must work on minimal images without zoneinfo

	"go.yaml.in/yaml/v3"
)

// ReportsConfig configures Slack reports and alerts (docs/reports.md).
// Secrets are never written in the file: only where to read them.
type ReportsConfig struct {
	// TimeZone applies to every schedule ("Europe/Berlin"); default UTC.
	TimeZone string
	// DashboardURL is linked from messages; empty for no links.
	DashboardURL string
	Slack        SlackConfig
	Schedules    []ReportSchedule
	Alerts       AlertsConfig
}

// SlackConfig says where the Slack secrets are. One of the webhook or the
// bot token is needed to send; with neither, reports are built and logged
// but not sent.
type SlackConfig struct {
	WebhookURLEnv  string
	WebhookURLFile string
	BotTokenEnv    string
	BotTokenFile   string
	// APIURL overrides Slack's Web API base (proxies, tests).
	APIURL string
}

// ReportSchedule is one scheduled report.
type ReportSchedule struct {
	Period  string // day, week or month
	Cron    string
	Channel string
	// Team limits the report to one team's workloads; empty for all.
	Team string
}

// AlertsConfig configures alert evaluation and routing.
type AlertsConfig struct {
	// Enabled is set when the configuration has an alerts section.
	Enabled bool
	// Schedule is how often alert conditions are evaluated; default @every 5m.
	Schedule string
	// Channel receives alerts with no more specific route.
	Channel string
	// Kinds routes alerts of a kind (budget, preemption_storm, ...) to a
	// channel; Teams routes a team's alerts.
	Kinds map[string]string
	Teams map[string]string
	// Thresholds; zero means the default (docs/reports.md).
	StormCount          int
	StormWindow         time.Duration
	SilentAgent         time.Duration
	FailingReplacements int
	PriceMove           float64
	BudgetLevels        []float64
}

// Enabled reports whether anything is scheduled.
func (r ReportsConfig) Enabled() bool { return len(r.Schedules) > 0 || r.Alerts.Enabled }

// CronSpec is a schedule with the configured time zone applied.
func (r ReportsConfig) CronSpec(spec string) string {
	if r.TimeZone == "" || strings.HasPrefix(spec, "@every") || strings.HasPrefix(spec, "CRON_TZ=") {
		return spec
	}
	return "CRON_TZ=" + r.TimeZone + " " + spec
}

// Secrets reads the webhook URL and bot token from where the configuration
// says. Errors name the variable or file, never the value.
func (s SlackConfig) Secrets() (webhookURL, botToken string, err error) {
	read := func(env, file, what string) (string, error) {
		if env != "" {
			v := strings.TrimSpace(os.Getenv(env))
			if v == "" {
				return "", fmt.Errorf("%w: reports.slack: %s: environment variable %s is empty or unset", ErrConfig, what, env)
			}
			return v, nil
		}
		if file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				return "", fmt.Errorf("%w: reports.slack: %s: cannot read %s: %v", ErrConfig, what, file, errNoValue(err))
			}
			v := strings.TrimSpace(string(b))
			if v == "" {
				return "", fmt.Errorf("%w: reports.slack: %s: %s is empty", ErrConfig, what, file)
			}
			return v, nil
		}
		return "", nil
	}
	if webhookURL, err = read(s.WebhookURLEnv, s.WebhookURLFile, "webhook URL"); err != nil {
		return "", "", err
	}
	if webhookURL != "" {
		if u, perr := url.Parse(webhookURL); perr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return "", "", fmt.Errorf("%w: reports.slack: the webhook URL is not an http(s) URL", ErrConfig)
		}
	}
	if botToken, err = read(s.BotTokenEnv, s.BotTokenFile, "bot token"); err != nil {
		return "", "", err
	}
	return webhookURL, botToken, nil
}

// errNoValue strips the path from an fs error (the message names it already).
func errNoValue(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

var periods = map[string]bool{"day": true, "week": true, "month": true}

var alertKinds = map[string]bool{"budget": true, "preemption_storm": true, "replacement_failing": true,
	"deadline_risk": true, "price_refresh": true, "agent_silent": true}

func (p *parser) reports(n *yaml.Node, r *ReportsConfig) error {
	err := p.mapping(n, "reports", map[string]func(*yaml.Node) error{
		"time_zone": func(n *yaml.Node) error {
			if err := p.str(n, "reports.time_zone", &r.TimeZone); err != nil {
				return err
			}
			if _, err := time.LoadLocation(r.TimeZone); err != nil || strings.ContainsAny(r.TimeZone, " \t") {
				return p.errorf(n, "reports.time_zone %q is not a time zone; want an IANA name such as Europe/Berlin or America/New_York", r.TimeZone)
			}
			return nil
		},
		"dashboard_url": func(n *yaml.Node) error {
			if err := p.str(n, "reports.dashboard_url", &r.DashboardURL); err != nil {
				return err
			}
			if u, err := url.Parse(r.DashboardURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return p.errorf(n, "reports.dashboard_url %q: want an http(s) URL such as https://gpubroker.example.com", r.DashboardURL)
			}
			return nil
		},
		"slack": func(n *yaml.Node) error { return p.slack(n, &r.Slack) },
		"schedules": func(n *yaml.Node) error {
			if n.Kind != yaml.SequenceNode {
				return p.errorf(n, "reports.schedules must be a list of {period, cron, channel}")
			}
			for i, e := range n.Content {
				var s ReportSchedule
				key := fmt.Sprintf("reports.schedules[%d]", i)
				err := p.mapping(e, key, map[string]func(*yaml.Node) error{
					"period": func(n *yaml.Node) error {
						if err := p.str(n, key+".period", &s.Period); err != nil {
							return err
						}
						if !periods[s.Period] {
							return p.errorf(n, "%s.period %q: want day, week or month", key, s.Period)
						}
						return nil
					},
					"cron": func(n *yaml.Node) error {
						if err := p.str(n, key+".cron", &s.Cron); err != nil {
							return err
						}
						if err := ValidateSchedule(s.Cron); err != nil {
							return p.errorf(n, "%s.cron: %v", key, err)
						}
						return nil
					},
					"channel": func(n *yaml.Node) error { return p.channel(n, key+".channel", &s.Channel) },
					"team":    func(n *yaml.Node) error { return p.str(n, key+".team", &s.Team) },
				})
				if err != nil {
					return err
				}
				if s.Period == "" || s.Cron == "" {
					return p.errorf(e, "%s needs period and cron, e.g. {period: day, cron: \"0 9 * * *\", channel: \"#gpu-costs\"}", key)
				}
				r.Schedules = append(r.Schedules, s)
			}
			return nil
		},
		"alerts": func(n *yaml.Node) error {
			r.Alerts.Enabled = true
			return p.alerts(n, &r.Alerts)
		},
	})
	if err != nil {
		return err
	}
	if r.Alerts.Schedule == "" {
		r.Alerts.Schedule = "@every 5m"
	}
	return nil
}

func (p *parser) channel(n *yaml.Node, key string, dst *string) error {
	if err := p.str(n, key, dst); err != nil {
		return err
	}
	if *dst == "" || strings.ContainsAny(*dst, " \t\n") || len(*dst) > 80 {
		return p.errorf(n, "%s %q: want a channel name or ID such as \"#gpu-costs\" or C0123456789", key, *dst)
	}
	return nil
}

func (p *parser) slack(n *yaml.Node, s *SlackConfig) error {
	secretInFile := func(key string) func(*yaml.Node) error {
		return func(n *yaml.Node) error {
			return p.errorf(n, "reports.slack.%s: secrets are never written in the configuration; use %s_env (an environment variable) or %s_file (a file readable only by the broker)", key, key, key)
		}
	}
	envName := func(key string, dst *string) func(*yaml.Node) error {
		return func(n *yaml.Node) error {
			if err := p.str(n, key, dst); err != nil {
				return err
			}
			for _, c := range *dst {
				if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
					return p.errorf(n, "%s %q: want an environment variable name such as GPUBROKER_SLACK_WEBHOOK", key, *dst)
				}
			}
			return nil
		}
	}
	err := p.mapping(n, "reports.slack", map[string]func(*yaml.Node) error{
		"webhook_url":      secretInFile("webhook_url"),
		"bot_token":        secretInFile("bot_token"),
		"webhook_url_env":  envName("reports.slack.webhook_url_env", &s.WebhookURLEnv),
		"webhook_url_file": func(n *yaml.Node) error { return p.str(n, "reports.slack.webhook_url_file", &s.WebhookURLFile) },
		"bot_token_env":    envName("reports.slack.bot_token_env", &s.BotTokenEnv),
		"bot_token_file":   func(n *yaml.Node) error { return p.str(n, "reports.slack.bot_token_file", &s.BotTokenFile) },
		"api_url": func(n *yaml.Node) error {
			if err := p.str(n, "reports.slack.api_url", &s.APIURL); err != nil {
				return err
			}
			if u, err := url.Parse(s.APIURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return p.errorf(n, "reports.slack.api_url %q: want an http(s) URL such as https://slack.com/api/", s.APIURL)
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	if s.WebhookURLEnv != "" && s.WebhookURLFile != "" || s.BotTokenEnv != "" && s.BotTokenFile != "" {
		return p.errorf(n, "reports.slack: give each secret either as _env or as _file, not both")
	}
	return nil
}

func (p *parser) alerts(n *yaml.Node, a *AlertsConfig) error {
	routes := func(key string, dst *map[string]string, valid map[string]bool) func(*yaml.Node) error {
		return func(n *yaml.Node) error {
			if n.Kind != yaml.MappingNode {
				return p.errorf(n, "%s must map names to channels", key)
			}
			*dst = map[string]string{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if valid != nil && !valid[k.Value] {
					return p.errorf(k, "%s: unknown alert kind %q; known kinds: budget, preemption_storm, replacement_failing, deadline_risk, price_refresh, agent_silent", key, k.Value)
				}
				var ch string
				if err := p.channel(v, key+"."+k.Value, &ch); err != nil {
					return err
				}
				(*dst)[k.Value] = ch
			}
			return nil
		}
	}
	return p.mapping(n, "reports.alerts", map[string]func(*yaml.Node) error{
		"schedule": func(n *yaml.Node) error {
			if err := p.str(n, "reports.alerts.schedule", &a.Schedule); err != nil {
				return err
			}
			if err := ValidateSchedule(a.Schedule); err != nil {
				return p.errorf(n, "reports.alerts.schedule: %v", err)
			}
			return nil
		},
		"channel":            func(n *yaml.Node) error { return p.channel(n, "reports.alerts.channel", &a.Channel) },
		"kinds":              routes("reports.alerts.kinds", &a.Kinds, alertKinds),
		"teams":              routes("reports.alerts.teams", &a.Teams, nil),
		"storm_count":        func(n *yaml.Node) error { return p.positive(n, "reports.alerts.storm_count", &a.StormCount) },
		"storm_window":       func(n *yaml.Node) error { return p.duration(n, "reports.alerts.storm_window", &a.StormWindow) },
		"agent_silent_after": func(n *yaml.Node) error { return p.duration(n, "reports.alerts.agent_silent_after", &a.SilentAgent) },
		"failing_replacements": func(n *yaml.Node) error {
			return p.positive(n, "reports.alerts.failing_replacements", &a.FailingReplacements)
		},
		"price_move": func(n *yaml.Node) error {
			v, err := p.fraction(n, "reports.alerts.price_move")
			a.PriceMove = v
			return err
		},
		"budget_levels": func(n *yaml.Node) error {
			if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
				return p.errorf(n, "reports.alerts.budget_levels must be a list of fractions, e.g. [0.5, 0.8, 1.0]")
			}
			a.BudgetLevels = nil
			for _, e := range n.Content {
				v, err := p.fraction(e, "reports.alerts.budget_levels")
				if err != nil {
					return err
				}
				a.BudgetLevels = append(a.BudgetLevels, v)
			}
			return nil
		},
	})
}

// fraction reads a number in (0, 10]: 0.2 is 20%; budget levels may exceed 1.
func (p *parser) fraction(n *yaml.Node, key string) (float64, error) {
	if err := p.scalar(n, key, "a number such as 0.8"); err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || !(v > 0 && v <= 10) {
		return 0, p.errorf(n, "%s %q: want a fraction such as 0.8 (80%%), above 0 and at most 10", key, n.Value)
	}
	return v, nil
}
