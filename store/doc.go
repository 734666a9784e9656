// Package store keeps gpubroker's state in a SQL database through gorm:
// SQLite (pure Go, no cgo) in a file under the user's data directory by
// default, PostgreSQL when given a postgres:// DSN.
//
// Today it holds the offer catalog (the current observation of every offer)
// and its price history (one point per observed price change). Its API takes
// and returns pricing.Offer and plain structs; gorm types never leave the
// package. Tables are created and upgraded by AutoMigrate, guarded by a
// schema version row so an older binary refuses a newer database.
//
// Adding a table (the broker daemon's workloads, instances, events, ...):
// declare its row struct in its own file, append it to models in migrate.go,
// bump SchemaVersion, and expose plain-struct methods on *Store.
package store
