// Package hardfleets holds the optimizer's slowest regression tests: the
// hardgen fleets whose plans the priced chains and the exact sub-MIPs
// must bring within reach of CBC's proven optima (TestPricedChains,
// TestSubMIP). They take minutes of CPU, so they are a test binary of
// their own: go test gives each binary ten minutes, and beside the rest
// of the optimizer's tests they came close to that limit. The slowest
// single fleets are binaries of their own, so that none nears it on a
// loaded machine: hardgen 100 / seed 9 is optimizer/hardfleets/strongbranch's,
// hardgen 150 / seed 42 optimizer/hardfleets/portfolio's, hardgen 150 /
// seed 44 optimizer/hardfleets/strongrins's.
package hardfleets
