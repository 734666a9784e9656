// Command terraform-provider-gpubroker is the Terraform / OpenTofu provider
// for gpubroker (package terraform); it only serves the provider
// over the plugin protocol (version 6).
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/gpubroker/gpubroker/terraform"
)

// version is set at release with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "start the provider for a debugger (prints TF_REATTACH_PROVIDERS)")
	flag.Parse()
	err := providerserver.Serve(context.Background(), terraform.Provider(version), providerserver.ServeOpts{
		Address: terraform.Address,
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
