# gpubroker from Terraform or OpenTofu: the cheapest offers, the best
# placement of a fine-tuning job, and the job registered with a broker.
#
#   gpubroker serve &                      # prints an admin token on first start
#   export GPUBROKER_ENDPOINT=http://127.0.0.1:8080 GPUBROKER_TOKEN=gpb_...
#   tofu plan && tofu apply                # or terraform
#
# Install the provider first: terraform/docs/index.md, "Installing".

terraform {
  required_providers {
    gpubroker = {
      source = "gpubroker/gpubroker"
    }
  }
}

# endpoint and token come from GPUBROKER_ENDPOINT and GPUBROKER_TOKEN.
provider "gpubroker" {}

locals {
  # One workload, written as in a policy file (docs/policy.md).
  finetune = {
    name                = "finetune-llama"
    team                = "research"
    kind                = "training"
    gpu                 = { models = ["A100-80GB", "H100"], count = 8, min_memory_gib = 40 }
    work                = { gpu_hours = 400 }
    deadline            = "3d"
    checkpoint_interval = "1h"
    spot                = "prefer"
  }
}

data "gpubroker_offers" "a100" {
  gpu_models    = ["A100-80GB"]
  capacity_type = "spot"
  limit         = 3
}

data "gpubroker_placement" "finetune" {
  name                = local.finetune.name
  team                = local.finetune.team
  kind                = local.finetune.kind
  gpu                 = local.finetune.gpu
  work                = local.finetune.work
  deadline            = local.finetune.deadline
  checkpoint_interval = local.finetune.checkpoint_interval
  spot                = local.finetune.spot
}

resource "gpubroker_workload" "finetune" {
  name                = local.finetune.name
  team                = local.finetune.team
  kind                = local.finetune.kind
  gpu                 = local.finetune.gpu
  work                = local.finetune.work
  deadline            = local.finetune.deadline
  checkpoint_interval = local.finetune.checkpoint_interval
  spot                = local.finetune.spot
}

output "cheapest_a100_spot" {
  value = [for o in data.gpubroker_offers.a100.offers : "${o.cloud} ${o.region} ${o.instance_type}: USD ${o.usd_per_gpu_hour}/GPU-hour"]
}

output "finetune_placement" {
  value = {
    cloud         = data.gpubroker_placement.finetune.cloud
    region        = data.gpubroker_placement.finetune.region
    zone          = data.gpubroker_placement.finetune.zone
    instance_type = data.gpubroker_placement.finetune.instance_type
    capacity_type = data.gpubroker_placement.finetune.capacity_type
    usd_per_hour  = data.gpubroker_placement.finetune.price_per_hour
    expected_cost = data.gpubroker_placement.finetune.expected_cost
    reason        = data.gpubroker_placement.finetune.reason
  }
}

output "registered_workload" {
  value = gpubroker_workload.finetune.id
}
