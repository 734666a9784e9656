# A workload registered with the broker is imported by its name.
terraform import gpubroker_workload.chat chat-api
