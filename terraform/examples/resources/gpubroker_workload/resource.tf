# An inference service registered with the broker, spread over two zones.
resource "gpubroker_workload" "chat" {
  name = "chat-api"
  team = "product"
  kind = "inference"
  gpu = {
    models = ["L4", "A10G"]
  }
  replicas = {
    min                = 2
    max                = 6
    target_utilization = 0.7
  }
  spread = { min_zones = 2 }
  spot   = "prefer"
  placement = {
    residency = ["eu"]
  }
}
