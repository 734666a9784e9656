// Package fleetsim runs the whole fleet controller in virtual time: the
// real reconciler (fleet.Reconciler) with the plan chain the broker builds
// (fleet.NewPlanChain: optimizer, autoscaling, and whatever live stages the
// chain gains), against fake clouds (providers/fake) whose spot pools replay
// real availability traces, with simulated agents and the spend ledger's
// billing rules (fleet/ledger).
//
// Time is a virtual clock passed to every component; nothing reads the wall
// clock. The loop is event driven: a pass runs only when something the
// reconciler would react to happens (an instance leaves pending or its agent
// registers, a used spot pool's traced capacity changes, a preemption notice
// ends, a pool block runs out, a training job finishes, a policy tick), so a
// pass's cost follows what changed, not the length of the simulation.
//
// Trace → pool mapping: every spot pool of the catalog (a cloud, zone,
// instance type) draws one trace file and a start offset into it from a
// seeded RNG, in sorted pool order (providers/fake.ComputeConfig), so the
// same catalog, traces and seed give the same run. A trace's count is the
// pool's spot capacity (instances) at each tick; on-demand pools are
// unlimited.
package fleetsim
