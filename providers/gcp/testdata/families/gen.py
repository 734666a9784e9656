# Writes the every-family fixtures (Compute Engine aggregated lists and the
# Cloud Billing catalog, in the APIs' JSON formats). Run from this folder:
#   python3 gen.py
# The SKU descriptions are the catalog's real spellings; prices are
# illustrative.
import json
P = "gpubroker-test"
ZONE = "us-central1-a"
SELF = "https://www.googleapis.com/compute/v1/projects/%s/zones/%s" % (P, ZONE)

accels = [("nvidia-tesla-t4", "NVIDIA T4", 4), ("nvidia-tesla-p4", "NVIDIA Tesla P4", 4),
          ("nvidia-tesla-p100", "NVIDIA Tesla P100", 4), ("nvidia-tesla-v100", "NVIDIA V100", 8),
          ("nvidia-l4", "NVIDIA L4", 8), ("nvidia-tesla-a100", "NVIDIA A100 40GB", 16),
          ("nvidia-a100-80gb", "NVIDIA A100 80GB", 8), ("nvidia-h100-80gb", "NVIDIA H100 80GB", 8),
          ("nvidia-h100-mega-80gb", "NVIDIA H100 80GB MEGA", 8), ("nvidia-h200-141gb", "NVIDIA H200 141GB", 8),
          ("nvidia-b200", "NVIDIA B200", 8), ("nvidia-rtx-pro-6000", "NVIDIA RTX PRO 6000", 8)]
at = {"kind": "compute#acceleratorTypeAggregatedList", "id": "projects/%s/aggregated/acceleratorTypes" % P,
      "items": {"zones/" + ZONE: {"acceleratorTypes": [
          {"kind": "compute#acceleratorType", "id": str(20000 + i), "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
           "name": n, "description": d, "zone": SELF, "selfLink": SELF + "/acceleratorTypes/" + n,
           "maximumCardsPerInstance": m} for i, (n, d, m) in enumerate(accels)]},
          "zones/asia-northeast2-a": {"warning": {"code": "NO_RESULTS_ON_PAGE",
              "message": "There are no results for scope 'zones/asia-northeast2-a' on this page.",
              "data": [{"key": "scope", "value": "zones/asia-northeast2-a"}]}}},
      "selfLink": "https://www.googleapis.com/compute/v1/projects/%s/aggregated/acceleratorTypes" % P}

machines = [("n1-standard-8", 8, 30720, None, 0), ("n1-standard-16", 16, 61440, None, 0),
            ("g2-standard-4", 4, 16384, "nvidia-l4", 1),
            ("a2-highgpu-1g", 12, 87040, "nvidia-tesla-a100", 1), ("a2-ultragpu-1g", 12, 174080, "nvidia-a100-80gb", 1),
            ("a3-highgpu-8g", 208, 1916928, "nvidia-h100-80gb", 8), ("a3-megagpu-8g", 208, 1916928, "nvidia-h100-mega-80gb", 8),
            ("a3-edgegpu-8g", 208, 1916928, "nvidia-h100-80gb", 8), ("a3-ultragpu-8g", 224, 3022848, "nvidia-h200-141gb", 8),
            ("a4-highgpu-8g", 224, 4063232, "nvidia-b200", 8), ("g4-standard-48", 48, 184320, "nvidia-rtx-pro-6000", 1)]
mts = []
for i, (n, c, mb, acc, cnt) in enumerate(machines):
    m = {"kind": "compute#machineType", "id": str(910000 + i), "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
         "name": n, "description": "%d vCPUs, %d GB RAM" % (c, mb // 1024), "guestCpus": c, "memoryMb": mb,
         "imageSpaceGb": 0, "maximumPersistentDisks": 128, "maximumPersistentDisksSizeGb": "263168", "zone": ZONE,
         "selfLink": SELF + "/machineTypes/" + n, "isSharedCpu": False, "architecture": "X86_64"}
    if acc:
        m["accelerators"] = [{"guestAcceleratorType": acc, "guestAcceleratorCount": cnt}]
    mts.append(m)
mt = {"kind": "compute#machineTypeAggregatedList", "id": "projects/%s/aggregated/machineTypes" % P,
      "items": {"zones/" + ZONE: {"machineTypes": mts}},
      "selfLink": "https://www.googleapis.com/compute/v1/projects/%s/aggregated/machineTypes" % P}

# (description, resource group, usage type, $/unit, unit)
skus = [
    ("Nvidia Tesla T4 GPU running in Americas", "GPU", "OnDemand", 0.35, "h"),
    ("Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", 0.14, "h"),
    ("Nvidia Tesla P4 GPU running in Americas", "GPU", "OnDemand", 0.60, "h"),
    ("Nvidia Tesla P4 GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", 0.24, "h"),
    ("Nvidia Tesla P100 GPU running in Americas", "GPU", "OnDemand", 1.46, "h"),
    ("Nvidia Tesla V100 GPU running in Americas", "GPU", "OnDemand", 2.48, "h"),
    ("Nvidia L4 GPU running in Americas", "GPU", "OnDemand", 0.560040, "h"),
    ("Nvidia Tesla A100 GPU running in Americas", "GPU", "OnDemand", 2.933908, "h"),
    ("Nvidia Tesla A100 80GB GPU running in Americas", "GPU", "OnDemand", 3.92808, "h"),
    ("Nvidia H100 80GB GPU running in Americas", "GPU", "OnDemand", 9.79655, "h"),
    ("Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", 2.25, "h"),
    # A3 Mega's GPU under its "Plus" name in this region.
    ("Nvidia H100 80GB Plus GPU running in Americas", "GPU", "OnDemand", 10.344276, "h"),
    # No "Nvidia" prefix on the H200.
    ("H200 141GB GPU running in Americas", "GPU", "OnDemand", 9.31174, "h"),
    ("H200 141GB GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", 3.72, "h"),
    # A4 is sold by the GPU slice (host share included); no A4 core/RAM SKUs.
    ("A4 Nvidia B200 (1 gpu slice) running in Americas", "GPU", "OnDemand", 16.11, "h"),
    ("Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in Americas", "GPU", "Preemptible", 5.6, "h"),
    ("DWS Calendar Mode A4 Nvidia B200 (1 gpu slice) running in Americas", "GPU", "OnDemand", 10.0, "h"),
    # G4's GPU: no "GPU" word.
    ("RTX 6000 96GB running in Americas", "GPU", "OnDemand", 2.25, "h"),
    ("N1 Predefined Instance Core running in Americas", "CPU", "OnDemand", 0.031611, "h"),
    ("N1 Predefined Instance Ram running in Americas", "RAM", "OnDemand", 0.004237, "GiBy.h"),
    ("Spot Preemptible N1 Predefined Instance Core running in Americas", "CPU", "Preemptible", 0.006655, "h"),
    ("Spot Preemptible N1 Predefined Instance Ram running in Americas", "RAM", "Preemptible", 0.000892, "GiBy.h"),
    ("G2 Instance Core running in Americas", "CPU", "OnDemand", 0.024988, "h"),
    ("G2 Instance Ram running in Americas", "RAM", "OnDemand", 0.002927, "GiBy.h"),
    ("A2 Instance Core running in Americas", "CPU", "OnDemand", 0.031611, "h"),
    ("A2 Instance Ram running in Americas", "RAM", "OnDemand", 0.004237, "GiBy.h"),
    ("A3 Instance Core running in Americas", "CPU", "OnDemand", 0.029563, "h"),
    ("A3 Instance Ram running in Americas", "RAM", "OnDemand", 0.002478, "GiBy.h"),
    ("Spot Preemptible A3 Instance Core running in Americas", "CPU", "Preemptible", 0.00887, "h"),
    ("Spot Preemptible A3 Instance Ram running in Americas", "RAM", "Preemptible", 0.000743, "GiBy.h"),
    ("A3Plus Instance Core running in Americas", "CPU", "OnDemand", 0.026924, "h"),
    ("A3Plus Instance Ram running in Americas", "RAM", "OnDemand", 0.002344, "GiBy.h"),
    ("A3Ultra Instance Core running in Americas", "CPU", "OnDemand", 0.028096, "h"),
    ("A3Ultra Instance Ram running in Americas", "RAM", "OnDemand", 0.002411, "GiBy.h"),
    ("Spot Preemptible A3Ultra Instance Core running in Americas", "CPU", "Preemptible", 0.01124, "h"),
    ("Spot Preemptible A3Ultra Instance Ram running in Americas", "RAM", "Preemptible", 0.000964, "GiBy.h"),
    ("G4 Instance Core running in Americas", "CPU", "OnDemand", 0.0245, "h"),
    ("G4 Instance Ram running in Americas", "RAM", "OnDemand", 0.0029, "GiBy.h"),
]
out = []
for i, (desc, grp, use, price, unit) in enumerate(skus):
    sid = "F%03X-0A1B-%04X" % (i, 4096 + i)
    units = int(price)
    nanos = int(round((price - units) * 1e9))
    out.append({"name": "services/6F81-5844-456A/skus/" + sid, "skuId": sid, "description": desc,
                "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                             "resourceGroup": grp, "usageType": use},
                "serviceRegions": ["us-central1"],
                "pricingInfo": [{"summary": "", "pricingExpression": {
                    "usageUnit": unit, "displayQuantity": 1,
                    "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": str(units), "nanos": nanos}}],
                    "usageUnitDescription": "hour" if unit == "h" else "gibibyte hour",
                    "baseUnit": "s" if unit == "h" else "By.s",
                    "baseUnitDescription": "second" if unit == "h" else "byte second",
                    "baseUnitConversionFactor": 3600 if unit == "h" else 3865470566400},
                    "currencyConversionRate": 1, "effectiveTime": "2026-12-01T08:15:06.263Z"}],
                "serviceProviderName": "Google",
                "geoTaxonomy": {"type": "REGIONAL", "regions": ["us-central1"]}})
for name, doc in [("accelerator-types.json", at), ("machine-types.json", mt), ("skus.json", {"skus": out, "nextPageToken": ""})]:
    with open(name, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
