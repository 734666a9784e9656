# An inference service registered with the broker, spread over two zones,
# scaled on its request rate from Prometheus, with a 99.5% availability goal
# and a daily load profile the planner costs it by.
resource "gpubroker_workload" "chat" {
  name = "chat-api"
  team = "product"
  kind = "inference"
  gpu = {
    models = ["L4", "A10G"]
  }
  replicas = {
    min                = 2
    max                = 10
    target_utilization = 0.7
  }
  spread      = { min_zones = 2 }
  spot        = "prefer"
  spot_policy = "spot-hedge"
  autoscale = {
    prometheus = {
      url                = "http://prometheus.monitoring:9090" # sensitive: not shown in plans
      query              = "sum(rate(http_requests_total{service=\"chat\"}[2m]))"
      target_per_replica = 40
    }
    scale_down_window = "10m"
  }
  availability = { goal = 0.995, window = "30d" }
  load = {
    # Replicas per hour of the day, UTC.
    replicas_by_hour = [2, 2, 2, 2, 2, 2, 3, 4, 6, 8, 9, 10, 10, 10, 9, 8, 8, 7, 6, 5, 4, 3, 2, 2]
  }
  placement = {
    residency = ["eu"]
  }
}

# A fine-tune that runs every Monday at 02:00 UTC on 16 H100s (two 8-GPU
# instances on a GPU network), under the uniform-progress spot policy.
resource "gpubroker_workload" "weekly_finetune" {
  name                = "weekly-finetune"
  team                = "research"
  kind                = "training"
  gpu                 = { models = ["H100"], count = 16, interconnect = "required" }
  work                = { gpu_hours = 640 }
  schedule            = "0 2 * * mon"
  deadline            = "2d"
  checkpoint_interval = "30m"
  spot                = "prefer"
  spot_policy         = "uniform-progress"
  scaling             = { intra_node = 0.95, inter_node = 0.85 }
}
