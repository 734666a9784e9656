// Package apiv1 is version 1 of the broker's wire contract: the JSON
// messages of every /api/v1 route (docs/api.md, docs/openapi.yaml) and one
// typed Client for them. The broker's handlers decode and encode these
// types; the agent, the CLI, the dashboard and the Terraform provider send
// and read them. A message is defined here once, so both ends cannot drift.
//
// The package depends on nothing of gpubroker's: enumerations (clouds, GPU
// models, capacity types, states, kinds) travel as plain strings whose
// valid values the broker checks and documents.
//
// Compatibility: fields are only ever added within v1. Request bodies are
// decoded strictly by the broker (unknown fields are a 400), so a client
// must not send a field its broker does not know; answers are decoded
// leniently by Client, so a newer broker's extra fields never break an
// older client.
package apiv1

// Version is the API version these types describe.
const Version = "v1"

// Prefix is the path prefix of every versioned route.
const Prefix = "/api/" + Version

// Route paths. Per-resource paths append "/" + the escaped name or id.
const (
	PathHealth     = "/healthz"
	PathReady      = "/readyz"
	PathOffers     = Prefix + "/offers"
	PathPlan       = Prefix + "/plan"
	PathBudgets    = Prefix + "/budgets"
	PathWorkloads  = Prefix + "/workloads"
	PathInstances  = Prefix + "/instances"
	PathEvents     = Prefix + "/events"
	PathBenchmarks = Prefix + "/benchmarks"
	PathTokens     = Prefix + "/tokens"
	PathRegister   = Prefix + "/agents/register"
	// PathAgents + "/" + id + one of the Suffix* constants.
	PathAgents          = Prefix + "/agents"
	SuffixHeartbeat     = "/heartbeat"
	SuffixNotices       = "/notices"
	SuffixDrains        = "/drains"
	SuffixBenchmarks    = "/benchmarks"
	SuffixProgress      = "/progress"
	HeaderIdempotency   = "Idempotency-Key"
	HeaderAuthorization = "Authorization"
)
