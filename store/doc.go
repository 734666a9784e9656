// Package store keeps gpubroker's state in a SQL database through gorm:
// SQLite (pure Go, no cgo) in a file under the user's data directory by
// default, PostgreSQL when given a postgres:// DSN.
//
// It holds the offer catalog (the current observation of every offer) and
// its price history, and the broker's state: workloads, instances, events,
// benchmarks, tokens, the leader lease, job runs and the stored plan. Each
// table lives in its own file. Its API takes and returns pricing.Offer and
// plain structs; gorm types never leave the package, and the records are
// not the API's wire format (broker/httpapi serves apiv1 types). Every
// table is created and upgraded by AutoMigrate in one transaction under a
// lock, guarded by one schema version row, so an older binary refuses a
// newer database.
//
// Adding a table: declare its row struct in its own file, append it to
// models in migrate.go, bump SchemaVersion, and expose plain-struct
// methods.
package store
