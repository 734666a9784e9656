// Package rinscore holds the slowest single hard-fleet test:
// hardgen 100 / seed 9 at tightness 0.5, which only the row pairs
// anchored on the RINS set's core bring near CBC's proven optimum
// (TestRINSCore). One solve is three to four minutes of CPU, so it is a
// test binary of its own beside optimizer/hardfleets: go test gives each
// binary ten minutes.
package rinscore
