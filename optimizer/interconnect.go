package optimizer

import (
	"strings"

	"github.com/gpubroker/gpubroker/pricing"
)

// Interconnect is the high-speed GPU network an instance type has for
// multi-node training, derived from its family in the clouds' documentation:
//
//	aws   "efa"             p3dn, p4d, p4de, p5, p5e, p5en (Elastic Fabric Adapter)
//	gcp   "gpudirect-tcpx"  a3-highgpu-8g; "gpudirect-tcpxo" a3-megagpu-8g;
//	      "gpudirect-rdma"  a3-ultragpu, a4-highgpu (RoCE)
//	azure "infiniband"      ND…r sizes (ND96asr_v4, ND96amsr_A100_v4, ND…isr_H100/H200_v5)
//
// It returns "" for instance types without one (or with fewer than 8 GPUs,
// which the clouds do not wire for it).
func Interconnect(c pricing.Cloud, instanceType string) string {
	it := strings.ToLower(instanceType)
	switch c {
	case pricing.AWS:
		for _, fam := range []string{"p3dn.", "p4d.", "p4de.", "p5.", "p5e.", "p5en."} {
			if strings.HasPrefix(it, fam) {
				return "efa"
			}
		}
	case pricing.GCP:
		switch {
		case strings.HasPrefix(it, "a3-highgpu-8g"):
			return "gpudirect-tcpx"
		case strings.HasPrefix(it, "a3-megagpu-8g"):
			return "gpudirect-tcpxo"
		case strings.HasPrefix(it, "a3-ultragpu"), strings.HasPrefix(it, "a4-"):
			return "gpudirect-rdma"
		}
	case pricing.Azure:
		// The "r" in an ND size's suffix is RDMA over InfiniBand.
		if strings.HasPrefix(it, "standard_nd") {
			size := strings.TrimPrefix(it, "standard_nd")
			suffix := strings.TrimLeft(size, "0123456789")
			if i := strings.IndexByte(suffix, '_'); i >= 0 {
				suffix = suffix[:i]
			}
			if strings.Contains(suffix, "r") {
				return "infiniband"
			}
		}
	}
	return ""
}
