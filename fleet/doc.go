// Package fleet is the autoscaler's reconciler: it turns the current plan
// into slots (each instance of a job, each inference replica) with stable
// identities, compares them with the instances the clouds list under the
// broker's tags and what the agents report, and launches, replaces and
// terminates until the two agree.
//
//	optimizer.Plan ──► Desired ──► slots ─┐
//	                                      ├─► Reconcile ──► launch / terminate (providers.Compute)
//	Compute.List + agents' heartbeats ────┘        │
//	                                               └─► store: intents, slots, instances, events
//
// A launch is written to the store as an intent with a deterministic client
// token before the cloud is called, so after a crash or a leader change the
// next pass finishes it (same token: the cloud returns the first instance)
// or adopts the instance it finds tagged with that token; it never starts a
// second one. Writes are fenced by the leader lease epoch. docs/fleet.md
// describes the state machine, the safety switches and the configuration.
package fleet
