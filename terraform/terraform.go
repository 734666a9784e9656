// Package terraform is the Terraform / OpenTofu provider for gpubroker,
// laid out like HashiCorp's provider scaffolding: the provider itself in
// internal/provider, configurations in examples/, generated documentation
// in docs/ (registry layout). cmd/terraform-provider-gpubroker serves it.
package terraform

import (
	"github.com/hashicorp/terraform-plugin-framework/provider"

	internal "github.com/gpubroker/gpubroker/terraform/internal/provider"
)

// Address is the provider's registry address.
const Address = "registry.terraform.io/gpubroker/gpubroker"

// Provider returns the provider factory that providerserver.Serve takes;
// version is shown to Terraform and in the broker's logs (User-Agent).
func Provider(version string) func() provider.Provider {
	return internal.New(internal.Options{Version: version})
}
