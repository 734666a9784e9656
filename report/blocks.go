package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"
)

// Block Kit limits (https://api.slack.com/reference/block-kit/blocks).
const (
	MaxBlocks        = 50
	MaxSectionText   = 3000
	MaxFields        = 10
	MaxFieldText     = 2000
	MaxHeaderText    = 150
	MaxContextElems  = 10
	maxListLinesEach = 8
)

// Message is one Slack message: fallback text (notifications, webhook
// previews) and Block Kit blocks, plus an optional PNG image uploaded after
// it where a bot token allows.
type Message struct {
	Text   string
	Blocks []slack.Block
	// Image is a PNG (the spend chart); Slack webhooks cannot carry files,
	// so a webhook-only setup sends the message without it.
	Image    []byte
	ImageAlt string
}

// Escape makes text safe inside Slack mrkdwn: &, < and > are control
// characters there, and names come from users, clouds and agents.
func Escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// clip cuts s to at most n runes, ending with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// lines joins items, at most max of them, ending "and N more", and keeps the
// result within limit characters.
func lines(items []string, max, limit int) string {
	more := 0
	if len(items) > max {
		more = len(items) - max
		items = items[:max]
	}
	out := strings.Join(items, "\n")
	for utf8.RuneCountInString(out) > limit-40 && len(items) > 1 {
		items = items[:len(items)-1]
		more++
		out = strings.Join(items, "\n")
	}
	if more > 0 {
		out += fmt.Sprintf("\n_and %d more_", more)
	}
	return clip(out, limit)
}

func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, clip(s, MaxSectionText), false, false)
}

func field(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, clip(s, MaxFieldText), false, false)
}

func header(s string) slack.Block {
	return slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, clip(s, MaxHeaderText), true, false))
}

func section(text string, fields ...string) slack.Block {
	var fs []*slack.TextBlockObject
	for i, f := range fields {
		if i == MaxFields {
			break
		}
		fs = append(fs, field(f))
	}
	var t *slack.TextBlockObject
	if text != "" {
		t = mrkdwn(text)
	}
	return slack.NewSectionBlock(t, fs, nil)
}

func contextBlock(parts ...string) slack.Block {
	var els []slack.MixedElement
	for i, p := range parts {
		if i == MaxContextElems {
			break
		}
		els = append(els, mrkdwn(p))
	}
	return slack.NewContextBlock("", els...)
}

func link(base, page, label string) string {
	if base == "" {
		return ""
	}
	return "<" + strings.TrimRight(base, "/") + page + "|" + label + ">"
}

// Blocks renders the report as a Block Kit message that reads well on a
// phone: a header, a few short sections with two-column fields, and a
// context line. Long lists end with "and N more"; the message never exceeds
// Slack's limits.
func Blocks(r Report) Message {
	var bl []slack.Block
	bl = append(bl, header(r.Title()))
	bl = append(bl, contextBlock(Escape(r.Window())))
	sp := r.Spend
	if sp.Source == "none" {
		bl = append(bl, section("*Spend*: nothing ran in this period."))
	} else {
		bl = append(bl, section("*Spend* "+link(r.DashboardURL, "/", "overview"),
			"*Spent*\n"+Money(sp.Total),
			"*All on-demand*\n"+Money(sp.OnDemand),
			"*Saved*\n"+Money(sp.Savings)+" ("+Pct(sp.SavingsPercent)+")",
			"*Source*\n"+Escape(sp.Source)))
		var items []string
		for _, l := range sp.ByCloud {
			items = append(items, fmt.Sprintf("• %s: %s", Escape(l.Name), Money(l.Cost)))
		}
		by := "*By cloud*\n" + lines(items, maxListLinesEach, MaxFieldText-20)
		items = items[:0]
		for _, l := range sp.ByTeam {
			items = append(items, fmt.Sprintf("• %s: %s", Escape(l.Name), Money(l.Cost)))
		}
		byTeam := "*By team*\n" + lines(items, maxListLinesEach, MaxFieldText-20)
		bl = append(bl, section("", by, byTeam))
		items = items[:0]
		for _, l := range sp.ByWorkload {
			items = append(items, fmt.Sprintf("• %s: %s (on-demand %s)", Escape(l.Name), Money(l.Cost), Money(l.OnDemand)))
		}
		bl = append(bl, section("*By workload*\n"+lines(items, maxListLinesEach, MaxSectionText-40)))
	}
	if len(r.Placements) > 0 {
		var items []string
		for _, p := range r.Placements {
			items = append(items, fmt.Sprintf("• *%s*: %s %s, %d×%s, $%.2f/h, exp. %s",
				Escape(p.Workload), Escape(p.Where), Escape(p.Capacity), p.GPUs, Escape(p.GPU), p.PricePerHour, Money(p.ExpectedCost)))
		}
		bl = append(bl, slack.NewDividerBlock(), section(fmt.Sprintf("*Top placements* %s\n%s", link(r.DashboardURL, "/plan", "plan"),
			lines(items, 5, MaxSectionText-60))))
	}
	a := r.Activity
	actFields := []string{
		"*Preemptions*\n" + fmt.Sprint(a.Preemptions),
		"*Replacements*\n" + fmt.Sprint(a.Replacements),
		"*Drains*\n" + fmt.Sprintf("%d (%d failed)", a.Drains, a.DrainFailures),
		"*Launches*\n" + fmt.Sprintf("%d (%d failed)", a.Launches, a.LaunchFailures),
	}
	bl = append(bl, slack.NewDividerBlock(), section("*Fleet activity* "+link(r.DashboardURL, "/events", "events"), actFields...))
	if len(a.PreemptedPools) > 0 {
		var items []string
		for _, p := range a.PreemptedPools {
			items = append(items, fmt.Sprintf("• %s: %d", Escape(p.Name), int(p.Cost)))
		}
		bl = append(bl, section("*Preempted pools*\n"+lines(items, 5, MaxSectionText)))
	}
	if len(r.DeadlineRisk) > 0 {
		var items []string
		for _, d := range r.DeadlineRisk {
			items = append(items, fmt.Sprintf("• :warning: *%s*: projected %.1fh vs deadline %.0fh (%d preemptions)",
				Escape(d.Workload), d.ProjectedHours, d.DeadlineHours, d.Preemptions))
		}
		bl = append(bl, section("*Deadline risk*\n"+lines(items, 5, MaxSectionText)))
	}
	if len(r.Budgets) > 0 {
		var items []string
		for _, b := range r.Budgets {
			mark := ""
			if b.ForecastPct >= 100 {
				mark = ":red_circle: "
			} else if b.ForecastPct >= 80 {
				mark = ":large_yellow_circle: "
			}
			items = append(items, fmt.Sprintf("• %s*%s*: %s of %s (%s), forecast %s", mark, Escape(b.Name),
				Money(b.Spent), Money(b.MonthlyUSD), Pct(b.SpentPct), Pct(b.ForecastPct)))
		}
		bl = append(bl, section("*Budgets this month* "+link(r.DashboardURL, "/budgets", "budgets")+"\n"+lines(items, 6, MaxSectionText-60)))
	}
	if len(r.PriceMoves) > 0 {
		var items []string
		for _, m := range r.PriceMoves {
			items = append(items, fmt.Sprintf("• %s: $%.4f → $%.4f (%+.1f%%)", Escape(m.Pool), m.From, m.To, m.ChangePct))
		}
		bl = append(bl, section("*Spot price moves* "+link(r.DashboardURL, "/prices", "prices")+"\n"+lines(items, 5, MaxSectionText-60)))
	}
	if len(r.SilentAgents) > 0 {
		var items []string
		for _, id := range r.SilentAgents {
			items = append(items, "• "+Escape(id))
		}
		bl = append(bl, section("*Silent agents*\n"+lines(items, 5, MaxSectionText)))
	}
	bl = append(bl, contextBlock("Catalog: "+Escape(r.Catalog.describe())))
	if len(bl) > MaxBlocks {
		bl = append(bl[:MaxBlocks-1], contextBlock(fmt.Sprintf("_and %d more sections_", len(bl)-MaxBlocks+1)))
	}
	text := fmt.Sprintf("%s: spent %s, saved %s (%s)", r.Title(), Money(sp.Total), Money(sp.Savings), Pct(sp.SavingsPercent))
	return Message{Text: text, Blocks: bl, ImageAlt: "Spend per day, " + r.Window()}
}

// WriteBlocks writes the message as the JSON payload Slack receives
// ({"text": ..., "blocks": [...]}), indented.
func WriteBlocks(w io.Writer, m Message) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"text": m.Text, "blocks": m.Blocks})
}
