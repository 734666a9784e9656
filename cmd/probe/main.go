package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/gpubroker/gpubroker/catalog"
	"github.com/gpubroker/gpubroker/fleet/fleetsim"
	"github.com/gpubroker/gpubroker/policy"
)

func main() {
	data, _ := os.ReadFile(os.Args[1])
	pol, err := policy.Parse(os.Args[1], data)
	if err != nil {
		panic(err)
	}
	traces, err := fleetsim.LoadTraceDir(os.Args[2])
	if err != nil {
		panic(err)
	}
	cat, err := catalog.Load(context.Background(), nil)
	if err != nil {
		panic(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := fleetsim.New(fleetsim.Config{Policy: pol, Catalog: cat, Traces: traces, Seed: 1, Duration: 24 * time.Hour, Log: log})
	if err != nil {
		panic(err)
	}
	rep, err := s.Run(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", rep.Total)
}
