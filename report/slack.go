package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// ErrNoDestination is returned when neither a webhook URL nor a bot token is
// configured.
var ErrNoDestination = errors.New("no Slack destination configured (webhook URL or bot token)")

// Sender posts messages to Slack: through an incoming webhook (the
// message goes to the webhook's channel; no image) or a bot token
// (chat.postMessage to the given channel, then the PNG through
// files.getUploadURLExternal + files.completeUploadExternal). Both are
// secrets: they never appear in logs or errors.
type Sender struct {
	WebhookURL string
	BotToken   string
	// APIURL is Slack's Web API base ("https://slack.com/api/"); tests point
	// it at a local server.
	APIURL string
	HTTP   *http.Client
	Log    *slog.Logger
	// MaxAttempts bounds tries per call (default 5); MaxRetryAfter caps
	// how long a 429's Retry-After is honoured before giving up (default 2m).
	MaxAttempts   int
	MaxRetryAfter time.Duration
	// Timeout bounds one attempt (default 15s).
	Timeout time.Duration
	// Sleep waits between attempts; tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Configured reports whether a destination is set.
func (s *Sender) Configured() bool { return s.WebhookURL != "" || s.BotToken != "" }

// Send posts m to channel (ignored for webhooks, whose channel is fixed).
// Rate limits (HTTP 429 with Retry-After), 5xx answers and timeouts are
// retried with back-off. The returned error is safe to log.
func (s *Sender) Send(ctx context.Context, channel string, m Message) error {
	switch {
	case s.BotToken != "":
		if channel == "" {
			return errors.New("slack: a bot token needs a channel to post to")
		}
		api := s.client()
		err := s.retry(ctx, "chat.postMessage", func(ctx context.Context) error {
			_, _, err := api.PostMessageContext(ctx, channel, slack.MsgOptionText(m.Text, false), slack.MsgOptionBlocks(m.Blocks...))
			return err
		})
		if err != nil || len(m.Image) == 0 {
			return err
		}
		return s.retry(ctx, "file upload", func(ctx context.Context) error {
			_, err := api.UploadFileContext(ctx, slack.UploadFileParameters{
				Reader: bytes.NewReader(m.Image), FileSize: len(m.Image), Filename: "gpubroker-spend.png",
				Title: m.ImageAlt, AltTxt: m.ImageAlt, Channel: channel,
			})
			return err
		})
	case s.WebhookURL != "":
		msg := &slack.WebhookMessage{Text: m.Text, Blocks: &slack.Blocks{BlockSet: m.Blocks}}
		return s.retry(ctx, "webhook", func(ctx context.Context) error {
			return slack.PostWebhookCustomHTTPContext(ctx, s.WebhookURL, s.httpClient(), msg)
		})
	}
	return ErrNoDestination
}

func (s *Sender) httpClient() *http.Client {
	if s.HTTP != nil {
		return s.HTTP
	}
	return &http.Client{Timeout: s.timeout() + 5*time.Second}
}

func (s *Sender) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return 15 * time.Second
}

func (s *Sender) client() *slack.Client {
	opts := []slack.Option{slack.OptionHTTPClient(s.httpClient())}
	if s.APIURL != "" {
		u := s.APIURL
		if !strings.HasSuffix(u, "/") {
			u += "/"
		}
		opts = append(opts, slack.OptionAPIURL(u))
	}
	return slack.New(s.BotToken, opts...)
}

func (s *Sender) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// retry runs call until it succeeds, fails for good, or attempts run out.
func (s *Sender) retry(ctx context.Context, what string, call func(context.Context) error) error {
	attempts := s.MaxAttempts
	if attempts <= 0 {
		attempts = 5
	}
	maxWait := s.MaxRetryAfter
	if maxWait <= 0 {
		maxWait = 2 * time.Minute
	}
	sleep := s.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	backoff := time.Second
	var last error
	for i := 1; i <= attempts; i++ {
		actx, cancel := context.WithTimeout(ctx, s.timeout())
		err := call(actx)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		wait, retryable := s.classify(err, backoff)
		if !retryable || i == attempts || ctx.Err() != nil {
			break
		}
		if wait > maxWait {
			return fmt.Errorf("slack: %s: rate limited for %s, more than the %s allowed: %s", what, wait, maxWait, s.Redact(err.Error()))
		}
		s.log().Warn("slack call failed; retrying", "call", what, "attempt", i, "wait", wait, "err", s.Redact(err.Error()))
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("slack: %s: %w", what, err)
		}
		backoff = min(backoff*2, 30*time.Second)
	}
	return fmt.Errorf("slack: %s: %s", what, s.Redact(last.Error()))
}

// classify says whether err is worth retrying and after how long.
func (s *Sender) classify(err error, backoff time.Duration) (time.Duration, bool) {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return max(rl.RetryAfter, time.Second), true
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		if sc.Code == http.StatusTooManyRequests || sc.Code >= 500 {
			return jitter(backoff), true
		}
		return 0, false
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return jitter(backoff), true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return jitter(backoff), true
	}
	return 0, false
}

func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/4+1))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var secretPatterns = regexp.MustCompile(`xox[a-z]-[A-Za-z0-9-]+|hooks\.slack\.com/[^\s"']+|https?://[^\s"']*/services/[^\s"']+`)

// Redact removes the configured secrets, and anything shaped like a Slack
// token or webhook URL, from s.
func (s *Sender) Redact(msg string) string {
	for _, sec := range []string{s.WebhookURL, s.BotToken} {
		if sec != "" {
			msg = strings.ReplaceAll(msg, sec, "[redacted]")
		}
	}
	return secretPatterns.ReplaceAllString(msg, "[redacted]")
}
