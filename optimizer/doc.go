// Package optimizer places GPU workloads on offers. It is pure: a price
// catalog, a policy and a speed table go in, a Plan comes out; it does no I/O.
//
// Placement works like Nomad's scheduler, in stages that keep their scores so
// every decision can be explained:
//
//	offers ──► feasibility (GPU model, count, memory, cloud/region/zone/residency,
//	           spot policy, deadline) ──► cost ranker (expected cost with
//	           preemption loss) ──► fleet solver (quotas, budgets) ──► Plan
//
// The cost model and the solver are described in docs/plan.md.
package optimizer
