package gcp

import (
	"math"
	"strings"
	"testing"
)

func TestParseSKUDescription(t *testing.T) {
	tests := []struct {
		desc string
		want skuDesc
		ok   bool
	}{
		{"Nvidia Tesla A100 GPU running in Americas", skuDesc{skuGPU, "nvidia-tesla-a100", false}, true},
		{"Nvidia Tesla A100 80GB GPU running in Americas", skuDesc{skuGPU, "nvidia-a100-80gb", false}, true},
		{"Nvidia Tesla A100 80GB GPU attached to Spot Preemptible VMs running in Americas", skuDesc{skuGPU, "nvidia-a100-80gb", true}, true},
		{"Nvidia Tesla T4 GPU attached to Preemptible VMs running in EMEA", skuDesc{skuGPU, "nvidia-tesla-t4", true}, true},
		{"Nvidia H100 80GB GPU running in Americas", skuDesc{skuGPU, "nvidia-h100-80gb", false}, true},
		{"Nvidia H100 80GB Mega GPU running in Americas", skuDesc{skuGPU, "nvidia-h100-mega-80gb", false}, true},
		{"Nvidia H100 Mega 80GB GPU running in Zurich", skuDesc{skuGPU, "nvidia-h100-mega-80gb", false}, true},
		{"Nvidia L4 GPU running in Sao Paulo", skuDesc{skuGPU, "nvidia-l4", false}, true},
		{"nvidia tesla v100 gpu running in americas", skuDesc{skuGPU, "nvidia-tesla-v100", false}, true},
		{"A2 Instance Core running in Americas", skuDesc{skuCore, "a2", false}, true},
		{"G2 Instance Ram running in EMEA", skuDesc{skuRAM, "g2", false}, true},
		{"Spot Preemptible A3 Instance Core running in APAC", skuDesc{skuCore, "a3", true}, true},
		{"N1 Predefined Instance Ram running in Americas", skuDesc{skuRAM, "n1", false}, true},
		{"Spot Preemptible N1 Predefined Instance Core running in Americas", skuDesc{skuCore, "n1", true}, true},
		{"Preemptible N1 Predefined Instance Core running in Americas", skuDesc{skuCore, "n1", true}, true},
		{"A3 Mega Instance Core running in Americas", skuDesc{skuCore, "a3mega", false}, true},
		{"H200 141GB GPU running in Belgium", skuDesc{skuGPU, "nvidia-h200-141gb", false}, true},
		{"H200 141GB GPU attached to Spot Preemptible VMs running in Americas", skuDesc{skuGPU, "nvidia-h200-141gb", true}, true},
		{"Nvidia H100 80GB Plus GPU running in Americas", skuDesc{skuGPU, "nvidia-h100-mega-80gb", false}, true},
		{"Nvidia H100 80GB Mega GPU attached to Spot Preemptible VMs running in Tokyo", skuDesc{skuGPU, "nvidia-h100-mega-80gb", true}, true},
		{"A3Plus Instance Core running in Americas", skuDesc{skuCore, "a3mega", false}, true},
		{"Spot Preemptible A3Plus Instance Ram running in EMEA", skuDesc{skuRAM, "a3mega", true}, true},
		{"A3Ultra Instance Core running in Americas", skuDesc{skuCore, "a3ultra", false}, true},
		{"A4 Nvidia B200 (1 gpu slice) running in Netherlands", skuDesc{skuGPUSlice, "nvidia-b200", false}, true},
		{"Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in Americas", skuDesc{skuGPUSlice, "nvidia-b200", true}, true},
		{"DWS Calendar Mode A4 Nvidia B200 (1 gpu slice) running in Americas", skuDesc{}, false},
		{"RTX 6000 96GB running in Oregon", skuDesc{skuGPU, "nvidia-rtx-pro-6000", false}, true},
		{"Spot Preemptible RTX 6000 96GB running in Oregon", skuDesc{skuGPU, "nvidia-rtx-pro-6000", true}, true},
		{"G4 Instance Core running in Americas", skuDesc{skuCore, "g4", false}, true},
		{"Nvidia Tesla P4 GPU running in Americas", skuDesc{skuGPU, "nvidia-tesla-p4", false}, true},
		{"Nvidia Tesla P100 GPU attached to Spot Preemptible VMs running in EMEA", skuDesc{skuGPU, "nvidia-tesla-p100", true}, true},
		// Not GPU VM rates.
		{"A4 Nvidia B200 running in Americas", skuDesc{}, false},
		{"Commitment v1: A2 Cpu in Americas for 1 Year", skuDesc{}, false},
		{"Nvidia Tesla T4 Virtual Workstation GPU running in Americas", skuDesc{}, false},
		{"Nvidia Tesla K80 GPU running in Americas", skuDesc{}, false},
		{"N1 Custom Instance Core running in Americas", skuDesc{}, false},
		{"Custom Instance Core running in Americas", skuDesc{}, false},
		{"Storage PD Capacity", skuDesc{}, false},
		{"Nvidia Tesla A100 GPU running in", skuDesc{}, false},
		{"Nvidia GPU running in Americas", skuDesc{}, false},
		{"Spot Preemptible Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas", skuDesc{}, false},
		{"Nvidia H100 80GB GPU running in Americas (DWS Defined Duration)", skuDesc{skuGPU, "nvidia-h100-80gb", false}, true},
		{"Nvidia H100 80GB GPU (DWS) running in Americas", skuDesc{}, false},
		{"Memory-optimized Instance Core running in Americas", skuDesc{}, false},
		{"", skuDesc{}, false},
	}
	for _, tc := range tests {
		got, ok := parseSKUDescription(tc.desc)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseSKUDescription(%q) = %+v, %v; want %+v, %v", tc.desc, got, ok, tc.want, tc.ok)
		}
	}
}

func TestMoneyToFloat(t *testing.T) {
	tests := []struct {
		cur     string
		units   int64
		nanos   int32
		want    float64
		wantErr string
	}{
		{"USD", 2, 933908000, 2.933908, ""},
		{"USD", 0, 31611000, 0.031611, ""},
		{"USD", 0, 0, 0, ""},
		{"USD", 7, 0, 7, ""},
		{"EUR", 1, 0, 0, "currency"},
		{"USD", 1, 1_000_000_000, 0, "out of range"},
		{"USD", 1, -5, 0, "different signs"},
		{"USD", -1, -5, 0, "negative"},
		{"USD", 0, -5, 0, "negative"},
		{"USD", math.MaxInt64, 0, 0, "implausibly large"},
	}
	for _, tc := range tests {
		got, err := moneyToFloat(tc.cur, tc.units, tc.nanos)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("moneyToFloat(%q, %d, %d) error %v, want %q", tc.cur, tc.units, tc.nanos, err, tc.wantErr)
			}
			continue
		}
		if err != nil || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("moneyToFloat(%q, %d, %d) = %v, %v; want %v", tc.cur, tc.units, tc.nanos, got, err, tc.want)
		}
	}
}

func FuzzParseSKUDescription(f *testing.F) {
	for _, s := range []string{
		"Nvidia Tesla A100 GPU running in Americas",
		"Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in EMEA",
		"Spot Preemptible N1 Predefined Instance Core running in Americas",
		"A3 Mega Instance Ram running in APAC",
		"Commitment v1: A2 Cpu in Americas for 1 Year",
		"running in running in", "Nvidia  GPU\trunning\u00a0in x",
		"H200 141GB GPU running in Belgium",
		"Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in Americas",
		"RTX 6000 96GB running in Oregon",
		"A3Plus Instance Core running in Americas",
		"Nvidia H100 80GB Plus GPU attached to Spot Preemptible VMs running in Tokyo",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, desc string) {
		d, ok := parseSKUDescription(desc)
		if !ok {
			if d != (skuDesc{}) {
				t.Fatalf("rejected %q but returned %+v", desc, d)
			}
			return
		}
		if d.Kind == skuUnknown || d.Name == "" {
			t.Fatalf("accepted %q as %+v", desc, d)
		}
		if (d.Kind == skuGPU || d.Kind == skuGPUSlice) && !strings.HasPrefix(d.Name, "nvidia-") {
			t.Fatalf("GPU SKU %q named %q", desc, d.Name)
		}
		// Case never changes the meaning.
		if u, ok := parseSKUDescription(strings.ToUpper(desc)); ok && u != d {
			t.Fatalf("%q and its upper case parse differently: %+v vs %+v", desc, d, u)
		}
	})
}

func FuzzMoneyToFloat(f *testing.F) {
	f.Add("USD", int64(2), int32(933908000))
	f.Add("USD", int64(0), int32(-1))
	f.Add("USD", int64(-3), int32(-999999999))
	f.Add("JPY", int64(100), int32(0))
	f.Add("USD", int64(math.MaxInt64), int32(999999999))
	f.Fuzz(func(t *testing.T, cur string, units int64, nanos int32) {
		v, err := moneyToFloat(cur, units, nanos)
		if err != nil {
			return
		}
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("moneyToFloat(%q, %d, %d) = %v", cur, units, nanos, v)
		}
		if math.Abs(v-(float64(units)+float64(nanos)*1e-9)) > 1e-6*math.Max(1, v) {
			t.Fatalf("moneyToFloat(%q, %d, %d) = %v, off the amount", cur, units, nanos, v)
		}
	})
}
