// Package report builds gpubroker's Slack reports and alerts: what the fleet
// cost and saved over a period, where it ran, what was preempted, replaced
// or drained, which jobs risk their deadline, how budgets burn, which prices
// moved, and how fresh the catalog is.
//
// The package is pure where it can be: Build turns plain Inputs (gathered by
// the caller from the store or the broker API) into a Report; Text, JSON and
// Blocks render it; SpendChart draws it as a PNG; Evaluate derives alerts
// and Dedupe decides which to send. Sender posts to Slack through
// github.com/slack-go/slack (incoming webhook or bot token), with retries,
// rate-limit handling and secrets redacted from every error.
package report
