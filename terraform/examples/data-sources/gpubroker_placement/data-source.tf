# Where an 8-GPU fine-tune of 400 GPU-hours that must finish in three days
# is cheapest on AWS.
data "gpubroker_placement" "finetune" {
  name = "finetune"
  kind = "training"
  gpu = {
    models         = ["A100-80GB", "H100"]
    count          = 8
    min_memory_gib = 40
  }
  work                = { gpu_hours = 400 }
  deadline            = "3d"
  checkpoint_interval = "1h"
  spot                = "prefer"
  placement = {
    clouds = ["aws"]
  }
}

# Feed the answer to the cloud's own provider, e.g.
#   resource "aws_instance" "trainer" {
#     instance_type     = data.gpubroker_placement.finetune.instance_type
#     availability_zone = data.gpubroker_placement.finetune.zone
#     ...
#   }
output "finetune" {
  value = {
    where         = "${data.gpubroker_placement.finetune.cloud} ${data.gpubroker_placement.finetune.region} ${data.gpubroker_placement.finetune.instance_type}"
    capacity      = data.gpubroker_placement.finetune.capacity_type
    usd_per_hour  = data.gpubroker_placement.finetune.price_per_hour
    expected_cost = data.gpubroker_placement.finetune.expected_cost
    why           = data.gpubroker_placement.finetune.reason
  }
}
