// Command brokerload is a bounded loopback load test of the broker's agent
// API: N simulated agents register, then each sends a heartbeat every
// interval for a fixed time; it prints throughput and latency percentiles.
// It runs the real API (dashboard + store) on a loopback listener in this
// process, on SQLite or PostgreSQL.
//
//	go run ./bench/brokerload -agents 10000 -interval 10s -duration 30s
//	go run ./bench/brokerload -db 'postgres://u:p@127.0.0.1/db?sslmode=disable'
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "brokerload:", err)
		os.Exit(1)
	}
}

func run() error {
	dsn := flag.String("db", "", "database DSN (default: a SQLite file in a temp dir)")
	agents := flag.Int("agents", 10000, "simulated agents")
	interval := flag.Duration("interval", 10*time.Second, "heartbeat interval per agent")
	duration := flag.Duration("duration", 30*time.Second, "measured time")
	conns := flag.Int("conns", 256, "HTTP keep-alive connections (agents share them)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measured phase to this file")
	flag.Parse()

	ctx := context.Background()
	if *dsn == "" {
		dir, err := os.MkdirTemp("", "brokerload")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*dsn = filepath.Join(dir, "broker.db")
	}
	st, err := store.Open(ctx, *dsn, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := st.Broker(ctx)
	if err != nil {
		return err
	}
	admin, hash, err := httpapi.NewToken()
	if err != nil {
		return err
	}
	if err := b.AddToken(ctx, store.TokenRecord{Hash: hash, Kind: store.TokenAdmin, Subject: "bench", CreatedAt: time.Now()}); err != nil {
		return err
	}
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		return err
	}
	api := httpapi.New(httpapi.Config{Store: b, Catalog: func() *pricing.Catalog { return cat },
		Logger: slog.New(slog.DiscardHandler)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: *conns, MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns, IdleConnTimeout: time.Minute}}

	// Register every agent (not measured).
	fmt.Printf("registering %d agents on %s ...\n", *agents, st.Dialect())
	start := time.Now()
	tokens := make([]string, *agents)
	var regMu sync.Mutex
	var regErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range *agents {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			body := fmt.Sprintf(`{"instance_id":"i-%06d","cloud":"aws","region":"us-east-1","instance_type":"g5.xlarge","gpu":"A10G","gpu_count":1}`, i)
			resp, err := do(client, base+"/api/v1/agents/register", admin, []byte(body))
			if err != nil {
				regMu.Lock()
				regErr = err
				regMu.Unlock()
				return
			}
			var r struct{ Token string }
			if err := json.Unmarshal(resp, &r); err != nil || r.Token == "" {
				regMu.Lock()
				regErr = fmt.Errorf("register answer %s", resp)
				regMu.Unlock()
				return
			}
			tokens[i] = r.Token
		}()
	}
	wg.Wait()
	if regErr != nil {
		return regErr
	}
	fmt.Printf("registered in %s\n", time.Since(start).Round(time.Millisecond))

	// Heartbeats: agent i sends at offset i*interval/N, then every interval.
	beat, _ := json.Marshal(map[string]any{"load1": 1.2, "gpus": []map[string]any{{"index": 0, "utilization": 0.73,
		"memory_used_mib": 18000, "memory_total_mib": 24576, "temperature_c": 61, "power_w": 210}}})
	var mu sync.Mutex
	lat := make([]time.Duration, 0, int(float64(*agents)*duration.Seconds()/interval.Seconds())+*agents)
	var errs atomic.Int64
	var errMu sync.Mutex
	var firstErr error
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	t0 := time.Now()
	end := t0.Add(*duration)
	for i := range *agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := t0.Add(time.Duration(int64(*interval) * int64(i) / int64(*agents)))
			url := fmt.Sprintf("%s/api/v1/agents/i-%06d/heartbeat", base, i)
			for next.Before(end) {
				time.Sleep(time.Until(next))
				s := time.Now()
				_, err := do(client, url, tokens[i], beat)
				d := time.Since(s)
				if err != nil {
					errs.Add(1)
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				} else {
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
				next = next.Add(*interval)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	fmt.Printf("store=%s agents=%d interval=%s duration=%s GOMAXPROCS=%d\n", st.Dialect(), *agents, *interval, *duration, runtime.GOMAXPROCS(0))
	fmt.Printf("heartbeats ok=%d errors=%d throughput=%.0f req/s\n", len(lat), errs.Load(), float64(len(lat))/elapsed.Seconds())
	fmt.Printf("latency p50=%s p90=%s p99=%s max=%s\n", pct(0.50).Round(10*time.Microsecond), pct(0.90).Round(10*time.Microsecond),
		pct(0.99).Round(10*time.Microsecond), pct(1).Round(10*time.Microsecond))
	if firstErr != nil {
		fmt.Printf("first error: %v\n", firstErr)
	}
	return nil
}

func do(c *http.Client, url, token string, body []byte) ([]byte, error) {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, out)
	}
	return out, nil
}
