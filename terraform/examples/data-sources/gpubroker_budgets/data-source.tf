# The broker's budgets and what its current plan expects to spend under each.
data "gpubroker_budgets" "all" {}

output "over_budget" {
  value = [for b in data.gpubroker_budgets.all.budgets : b.name if b.planned_usd > b.monthly_usd]
}
