terraform {
  required_providers {
    gpubroker = {
      source = "gpubroker/gpubroker"
    }
  }
}

# Online: a running broker (`gpubroker serve`). Leave both out (and unset
# GPUBROKER_ENDPOINT) to work offline on the built-in price snapshot.
provider "gpubroker" {
  endpoint = "http://127.0.0.1:8080"
  token    = var.gpubroker_token # or GPUBROKER_TOKEN
}

variable "gpubroker_token" {
  type      = string
  sensitive = true
}
