// Package strongbranch holds the regression test of strongRINS's strong
// branching, least-use pruning and grown sets (optimizer/strongbranch.go)
// on hardgen 100 / 9 at 0.5. It is a package of its own so that its
// minutes of solving run beside the other hard fleets' binaries, not
// after them (see optimizer/hardfleets).
package strongbranch
