// Package portfolio holds the regression test of the optimizer's second
// trajectory (optimizer/portfolio.go) on the hard fleet it brings within
// 0.1% of CBC's proven optimum. It solves a hard 150-workload fleet twice
// over (one trajectory per core), so it is a test binary of its own,
// like optimizer/hardfleets/strongbranch, and neither binary nears go test's
// time limit on a loaded machine.
package portfolio
