// Package pricing holds gpubroker's price data: canonical GPU models and their
// spec table, the Offer (one purchasable GPU shape in one place), the Catalog
// of offers with fast filtered queries, merging and staleness, and the
// embedded price snapshot that makes everything work offline.
//
// It never calls a cloud: providers/ fill a Catalog, the optimizer reads it.
package pricing
