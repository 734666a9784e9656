// Package strongrins holds the regression test of the optimizer's last
// improvement step, RINS from a strongly cut whole-fleet LP
// (optimizer/strongrins.go), on the hard fleet it brings within 0.1% of
// CBC's proven optimum. It solves a hard 150-workload fleet (two
// trajectories, one per core), so it is a test binary of its own, like
// optimizer/hardfleets/portfolio.
package strongrins
