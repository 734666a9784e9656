package gcp

import (
	"fmt"
	"math"
	"strings"
	"unicode"
)

// skuKind is what one Cloud Billing SKU of Compute Engine bills.
type skuKind uint8

const (
	skuUnknown skuKind = iota
	// skuGPU bills one GPU for an hour; Name is the Compute Engine
	// accelerator type ("nvidia-tesla-a100").
	skuGPU
	// skuCore bills one vCPU of a machine family for an hour; Name is the
	// family ("a2", "n1").
	skuCore
	// skuRAM bills one GiB of a machine family's memory for an hour.
	skuRAM
	// skuGPUSlice bills one GPU together with its share of the machine's
	// vCPUs, memory and bundled Local SSD ("A4 Nvidia B200 (1 gpu slice)"):
	// families sold this way have no core or RAM SKUs, so a VM costs
	// slices × GPUs. Name is the accelerator type.
	skuGPUSlice
)

func (k skuKind) String() string {
	switch k {
	case skuGPU:
		return "gpu"
	case skuCore:
		return "core"
	case skuRAM:
		return "ram"
	case skuGPUSlice:
		return "gpu-slice"
	}
	return "unknown"
}

// skuDesc is what a SKU description says: kind, the accelerator type or
// machine family it prices, and whether it is the Spot (preemptible) rate.
type skuDesc struct {
	Kind skuKind
	Name string
	Spot bool
}

// gpuSKUNames maps the model words of a GPU SKU description (lower-cased,
// "Tesla" dropped, joined by "-") onto Compute Engine accelerator types.
// Descriptions name the model in marketing words ("Nvidia Tesla A100 80GB
// GPU"); the API's machine types name it by accelerator type.
//
// The names are the ones the catalog really uses, which are not uniform:
// A3 Mega's GPU appears as "H100 80GB Mega" and "H100 Mega 80GB" and, in
// some regions, "H100 80GB Plus"; the H200 SKU drops the "Nvidia" prefix
// ("H200 141GB GPU running in Belgium"); the G4 GPU is "RTX 6000 96GB" with
// no "GPU" word at all (see gpuNoGPUWord).
var gpuSKUNames = map[string]string{
	"h100-80gb-plus": "nvidia-h100-mega-80gb",
	"h100-plus-80gb": "nvidia-h100-mega-80gb",
	"h100-plus":      "nvidia-h100-mega-80gb",
	"b200":           "nvidia-b200",
	"b200-180gb":     "nvidia-b200",
	"gb200":          "nvidia-gb200",
	"rtx-pro-6000":   "nvidia-rtx-pro-6000",
	"rtx-6000-96gb":  "nvidia-rtx-pro-6000",

	"a100":           "nvidia-tesla-a100",
	"a100-40gb":      "nvidia-tesla-a100",
	"a100-80gb":      "nvidia-a100-80gb",
	"h100":           "nvidia-h100-80gb",
	"h100-80gb":      "nvidia-h100-80gb",
	"h100-80gb-mega": "nvidia-h100-mega-80gb",
	"h100-mega-80gb": "nvidia-h100-mega-80gb",
	"h100-mega":      "nvidia-h100-mega-80gb",
	"h200":           "nvidia-h200-141gb",
	"h200-141gb":     "nvidia-h200-141gb",
	"l4":             "nvidia-l4",
	"t4":             "nvidia-tesla-t4",
	"v100":           "nvidia-tesla-v100",
	"p100":           "nvidia-tesla-p100",
	"p4":             "nvidia-tesla-p4",
}

// gpuNoGPUWord are model words that name a GPU SKU whose description has no
// "GPU" word ("RTX 6000 96GB running in Oregon").
var gpuNoGPUWord = map[string]string{
	"rtx-6000-96gb": "nvidia-rtx-pro-6000",
	"rtx-pro-6000":  "nvidia-rtx-pro-6000",
}

// hostFamilyNames maps the family word(s) of core and RAM SKUs onto the
// billing family machineFamily derives from a machine type name where the
// two differ: A3 Mega hosts are billed as "A3Plus", A3 Ultra as "A3Ultra".
var hostFamilyNames = map[string]string{
	"a3plus":  "a3mega",
	"a3mega":  "a3mega",
	"a3ultra": "a3ultra",
}

// parseSKUDescription reads a Compute Engine SKU description such as
//
//	Nvidia Tesla A100 GPU running in Americas
//	Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas
//	A2 Instance Core running in Americas
//	Spot Preemptible N1 Predefined Instance Ram running in EMEA
//
// It returns false for every other SKU (commitments, licences, disks,
// workstation GPUs, custom machine types, sole tenancy): those words never
// price an on-demand or Spot GPU VM. The location after "running in" is
// ignored: a SKU's serviceRegions say where it applies.
func parseSKUDescription(desc string) (skuDesc, bool) {
	w := strings.Fields(desc)
	// Everything ends in "running in <place...>"; cut there.
	at := -1
	for i := 0; i+1 < len(w); i++ {
		if strings.EqualFold(w[i], "running") && strings.EqualFold(w[i+1], "in") {
			at = i
			break
		}
	}
	if at < 0 || at+2 >= len(w) {
		return skuDesc{}, false
	}
	w = w[:at]
	var d skuDesc
	if len(w) >= 2 && eq(w[0], "spot") && eq(w[1], "preemptible") {
		d.Spot, w = true, w[2:]
	} else if len(w) >= 1 && eq(w[0], "preemptible") {
		d.Spot, w = true, w[1:]
	}
	if len(w) == 0 {
		return skuDesc{}, false
	}
	if len(w) >= 3 && eq(w[1], "nvidia") && isWord(w[0]) {
		// "A4 Nvidia B200 (1 gpu slice)": a GPU billed with its host share.
		return parseSliceWords(w[2:], d)
	}
	if eq(w[0], "nvidia") {
		return parseGPUWords(w[1:], d)
	}
	// Newer GPU SKUs drop the vendor ("H200 141GB GPU running in ...").
	if g, ok := parseGPUWords(w, d); ok {
		return g, true
	}
	return parseHostWords(w, d)
}

// parseSliceWords reads "<model words> (1 gpu slice)".
func parseSliceWords(w []string, d skuDesc) (skuDesc, bool) {
	n := len(w)
	if n < 4 || !eq(strings.Join(w[n-3:], " "), "(1 gpu slice)") {
		return skuDesc{}, false
	}
	var model []string
	for _, x := range w[:n-3] {
		if !isWord(x) {
			return skuDesc{}, false
		}
		model = append(model, strings.ToLower(x))
	}
	name, ok := gpuSKUNames[strings.Join(model, "-")]
	if !ok {
		return skuDesc{}, false
	}
	d.Kind, d.Name = skuGPUSlice, name
	return d, true
}

// parseGPUWords reads "<model words> GPU [attached to [Spot] Preemptible VMs]".
func parseGPUWords(w []string, d skuDesc) (skuDesc, bool) {
	g := -1
	for i, x := range w {
		if eq(x, "gpu") {
			g = i
			break
		}
	}
	if g < 0 {
		// A few SKUs name the model only ("RTX 6000 96GB running in ...").
		var model []string
		for _, x := range w {
			if !isWord(x) {
				return skuDesc{}, false
			}
			model = append(model, strings.ToLower(x))
		}
		if name, ok := gpuNoGPUWord[strings.Join(model, "-")]; ok {
			d.Kind, d.Name = skuGPU, name
			return d, true
		}
		return skuDesc{}, false
	}
	if g == 0 {
		return skuDesc{}, false
	}
	switch tail := strings.ToLower(strings.Join(w[g+1:], " ")); tail {
	case "":
	case "attached to spot preemptible vms", "attached to preemptible vms":
		if d.Spot {
			return skuDesc{}, false // "Spot Preemptible Nvidia ... attached to Spot ...": not a real shape
		}
		d.Spot = true
	default:
		return skuDesc{}, false
	}
	var model []string
	for _, x := range w[:g] {
		if eq(x, "tesla") {
			continue
		}
		if !isWord(x) {
			return skuDesc{}, false
		}
		model = append(model, strings.ToLower(x))
	}
	name, ok := gpuSKUNames[strings.Join(model, "-")]
	if !ok {
		return skuDesc{}, false
	}
	d.Kind, d.Name = skuGPU, name
	return d, true
}

// parseHostWords reads "<family> [Predefined] Instance (Core|Ram)".
func parseHostWords(w []string, d skuDesc) (skuDesc, bool) {
	n := len(w)
	if n < 3 || !eq(w[n-2], "instance") {
		return skuDesc{}, false
	}
	switch {
	case eq(w[n-1], "core"):
		d.Kind = skuCore
	case eq(w[n-1], "ram"):
		d.Kind = skuRAM
	default:
		return skuDesc{}, false
	}
	fam := w[:n-2]
	if len(fam) > 1 && eq(fam[len(fam)-1], "predefined") {
		fam = fam[:len(fam)-1]
	}
	// Families are one or two words ("A2", "A3 Mega"); longer prefixes are
	// other products ("Memory-optimized Upgrade Premium ...").
	if len(fam) == 0 || len(fam) > 2 {
		return skuDesc{}, false
	}
	var b strings.Builder
	for _, x := range fam {
		if !isWord(x) || eq(x, "custom") || eq(x, "predefined") {
			return skuDesc{}, false
		}
		b.WriteString(strings.ToLower(x))
	}
	d.Name = b.String()
	if f, ok := hostFamilyNames[d.Name]; ok {
		d.Name = f
	}
	return d, true
}

func eq(a, b string) bool { return strings.EqualFold(a, b) }

// isWord accepts the letters and digits model and family names are made of.
func isWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return false
		}
	}
	return true
}

// moneyToFloat converts a google.type.Money amount (whole units plus
// nano units) to a float, enforcing the type's invariants: nanos within
// ±999,999,999 and of the same sign as units, and a non-negative total (a
// price). currency must be USD: gpubroker compares prices across clouds in
// USD and asks the catalog for USD.
func moneyToFloat(currency string, units int64, nanos int32) (float64, error) {
	if currency != "USD" {
		return 0, fmt.Errorf("price in currency %q, want USD", currency)
	}
	if nanos <= -1e9 || nanos >= 1e9 {
		return 0, fmt.Errorf("price nanos %d out of range; want -999999999..999999999", nanos)
	}
	if (units > 0 && nanos < 0) || (units < 0 && nanos > 0) {
		return 0, fmt.Errorf("price units %d and nanos %d have different signs", units, nanos)
	}
	if units < 0 || nanos < 0 {
		return 0, fmt.Errorf("negative price %d units %d nanos", units, nanos)
	}
	// Prices beyond 2^53 units would lose precision; no hourly price is near.
	if units > 1<<53 {
		return 0, fmt.Errorf("price %d units is implausibly large", units)
	}
	v := float64(units) + float64(nanos)/1e9
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("price %d units %d nanos is not a number", units, nanos)
	}
	return v, nil
}
