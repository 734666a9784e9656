package report

import (
	"encoding/base64"
	"html"
	"regexp"
	"strings"

	"github.com/slack-go/slack"
)

// PreviewHTML renders a message roughly as Slack shows it, as a standalone
// HTML page: for `gpubroker report --output html`, to look at a report
// before wiring Slack, and for the documentation's screenshots. It renders
// the mrkdwn subset the report uses (bold, italics, links, line breaks,
// a few emoji).
func PreviewHTML(m Message) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>` + html.EscapeString(m.Text) + `</title><style>
body{font:15px/1.46 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#1d1c1d;background:#fff;margin:0;padding:16px;max-width:560px}
.msg{display:flex;gap:8px}.av{width:36px;height:36px;border-radius:6px;background:#1f4e9c;color:#fff;font-weight:700;display:flex;align-items:center;justify-content:center;flex:none}
.who{font-weight:900}.app{font-size:11px;background:#ddd;border-radius:3px;padding:0 3px;margin-left:4px;color:#555}
h1{font-size:18px;margin:6px 0}.ctx{color:#616061;font-size:12px;margin:4px 0}.sec{margin:6px 0}
.fields{display:grid;grid-template-columns:1fr 1fr;gap:4px 16px;margin:6px 0}hr{border:0;border-top:1px solid #ddd;margin:10px 0}
a{color:#1264a3;text-decoration:none}img{max-width:100%;border:1px solid #ddd;border-radius:6px;margin-top:6px}
</style></head><body><div class="msg"><div class="av">G</div><div><span class="who">gpubroker</span><span class="app">APP</span>`)
	for _, bl := range m.Blocks {
		switch bl := bl.(type) {
		case *slack.HeaderBlock:
			b.WriteString("<h1>" + html.EscapeString(bl.Text.Text) + "</h1>")
		case *slack.ContextBlock:
			var parts []string
			for _, e := range bl.ContextElements.Elements {
				if t, ok := e.(*slack.TextBlockObject); ok {
					parts = append(parts, mrkdwnHTML(t.Text))
				}
			}
			b.WriteString(`<div class="ctx">` + strings.Join(parts, " · ") + "</div>")
		case *slack.DividerBlock:
			b.WriteString("<hr>")
		case *slack.SectionBlock:
			b.WriteString(`<div class="sec">`)
			if bl.Text != nil {
				b.WriteString("<div>" + mrkdwnHTML(bl.Text.Text) + "</div>")
			}
			if len(bl.Fields) > 0 {
				b.WriteString(`<div class="fields">`)
				for _, f := range bl.Fields {
					b.WriteString("<div>" + mrkdwnHTML(f.Text) + "</div>")
				}
				b.WriteString("</div>")
			}
			b.WriteString("</div>")
		}
	}
	if len(m.Image) > 0 {
		b.WriteString(`<img alt="` + html.EscapeString(m.ImageAlt) + `" src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(m.Image) + `">`)
	}
	b.WriteString("</div></div></body></html>\n")
	return b.String()
}

var (
	mdLink   = regexp.MustCompile(`<(https?://[^|<>\s"]+)\|([^<>]*)>`)
	mdBold   = regexp.MustCompile(`\*([^*\n]+)\*`)
	mdItalic = regexp.MustCompile(`(^|\s)_([^_\n]+)_`)
	emoji    = strings.NewReplacer(":warning:", "⚠️", ":rotating_light:", "🚨", ":red_circle:", "🔴", ":large_yellow_circle:", "🟡")
)

// mrkdwnHTML turns Slack mrkdwn into HTML. User text reached the blocks
// escaped by Escape (&amp; &lt; &gt;, which HTML reads the same way), so the
// only raw angle brackets are the report's own links: those become anchors,
// and anything else that could be markup is escaped.
func mrkdwnHTML(s string) string {
	var links []string
	s = mdLink.ReplaceAllStringFunc(s, func(m string) string {
		sub := mdLink.FindStringSubmatch(m)
		links = append(links, `<a href="`+html.EscapeString(sub[1])+`">`+html.EscapeString(sub[2])+`</a>`)
		return "\x00"
	})
	s = strings.NewReplacer(`"`, "&quot;", "'", "&#39;", "<", "&lt;", ">", "&gt;").Replace(s)
	s = mdBold.ReplaceAllString(s, "<b>$1</b>")
	s = mdItalic.ReplaceAllString(s, "$1<i>$2</i>")
	s = emoji.Replace(s)
	for _, l := range links {
		s = strings.Replace(s, "\x00", l, 1)
	}
	return strings.ReplaceAll(s, "\n", "<br>")
}
