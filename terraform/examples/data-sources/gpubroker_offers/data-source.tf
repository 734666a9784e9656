# The five cheapest spot H100 offers in US regions, by price per GPU-hour.
data "gpubroker_offers" "h100_spot" {
  gpu_models    = ["H100"]
  capacity_type = "spot"
  regions       = ["us-*"]
  limit         = 5
}

output "cheapest_h100_spot" {
  value = [
    for o in data.gpubroker_offers.h100_spot.offers :
    "${o.cloud} ${o.zone != "" ? o.zone : o.region} ${o.instance_type}: USD ${o.usd_per_gpu_hour}/GPU-hour"
  ]
}
