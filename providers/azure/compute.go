package azure

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"
	"golang.org/x/crypto/ssh"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// TagsKey is the VM tag holding the launch request's tags verbatim (as
// JSON) when they fit: Azure tag names may not contain "/", so the other
// tags carry sanitised names and List gives back these.
const TagsKey = "gpubroker-tags"

// ComputeConfig configures a Compute.
type ComputeConfig struct {
	// SubscriptionID; empty means $AZURE_SUBSCRIPTION_ID.
	SubscriptionID string
	// ResourceGroup VMs, NICs and disks are created in (required).
	ResourceGroup string
	// Subnets maps location → subnet resource ID
	// (/subscriptions/…/virtualNetworks/NAME/subnets/NAME); a VM's NIC is
	// created in its location's subnet.
	Subnets map[string]string
	// Image is a marketplace URN "publisher:offer:sku:version" (e.g.
	// "microsoft-dsvm:ubuntu-hpc:2204:latest") or an image resource ID.
	Image string
	// AdminUsername defaults to "gpubroker". SSHPublicKey (OpenSSH
	// format) is optional: without one a throw-away key is used and
	// nobody can log in.
	AdminUsername string
	SSHPublicKey  string
	// OSDiskGB (default 128) and OSDiskType (default "StandardSSD_LRS").
	OSDiskGB   int32
	OSDiskType string
	// AcceleratedNetworking on the NIC (supported by the NC/ND sizes).
	AcceleratedNetworking bool
	// Identity is a user-assigned managed identity resource ID; optional.
	Identity string

	// Credential for ARM; nil means azidentity.DefaultAzureCredential.
	Credential azcore.TokenCredential
	// Cloud selects ARM's endpoint and audience (sovereign clouds); zero
	// means Azure public cloud.
	Cloud cloud.Configuration
	// Endpoint overrides ARM's endpoint of Cloud, keeping its token
	// audience (a private link or a proxy in front of management.azure.com).
	Endpoint string
	// HTTPClient carries every request; nil means azcore's default.
	HTTPClient *http.Client
	// InsecureAllowCredentialWithHTTP: for local test servers only.
	InsecureAllowCredentialWithHTTP bool
	// Retry tunes azcore's retry policy (429 with Retry-After, 5xx).
	Retry policy.RetryOptions
	// PollFrequency between long-running-operation polls without a
	// Retry-After header (default 5 s).
	PollFrequency time.Duration
	Logger        *slog.Logger
	Now           func() time.Time
}

// vmAPI, nicAPI and diskAPI narrow the SDK clients to the calls made.
type vmAPI interface {
	BeginCreateOrUpdate(context.Context, string, string, armcompute.VirtualMachine, *armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions) (*runtime.Poller[armcompute.VirtualMachinesClientCreateOrUpdateResponse], error)
	BeginDelete(context.Context, string, string, *armcompute.VirtualMachinesClientBeginDeleteOptions) (*runtime.Poller[armcompute.VirtualMachinesClientDeleteResponse], error)
	NewListPager(string, *armcompute.VirtualMachinesClientListOptions) *runtime.Pager[armcompute.VirtualMachinesClientListResponse]
}

type nicAPI interface {
	BeginCreateOrUpdate(context.Context, string, string, armnetwork.Interface, *armnetwork.InterfacesClientBeginCreateOrUpdateOptions) (*runtime.Poller[armnetwork.InterfacesClientCreateOrUpdateResponse], error)
	BeginDelete(context.Context, string, string, *armnetwork.InterfacesClientBeginDeleteOptions) (*runtime.Poller[armnetwork.InterfacesClientDeleteResponse], error)
}

type diskAPI interface {
	BeginDelete(context.Context, string, string, *armcompute.DisksClientBeginDeleteOptions) (*runtime.Poller[armcompute.DisksClientDeleteResponse], error)
}

var (
	_ vmAPI             = (*armcompute.VirtualMachinesClient)(nil)
	_ nicAPI            = (*armnetwork.InterfacesClient)(nil)
	_ diskAPI           = (*armcompute.DisksClient)(nil)
	_ providers.Compute = (*Compute)(nil)
)

// Compute launches, lists and deletes Azure VMs with their NICs and OS
// disks. It is safe for concurrent use.
type Compute struct {
	cfg    ComputeConfig
	log    *slog.Logger
	vms    vmAPI
	nics   nicAPI
	disks  diskAPI
	sshKey string
	poll   *runtime.PollUntilDoneOptions
}

var (
	reRG        = regexp.MustCompile(`^[-\w._()]{1,90}$`)
	reSubnetID  = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/virtualNetworks/[^/]+/subnets/[^/]+$`)
	reURN       = regexp.MustCompile(`^[^:\s]+:[^:\s]+:[^:\s]+:[^:\s]+$`)
	reImageID   = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/(images|galleries)/`)
	reIdentity  = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.ManagedIdentity/userAssignedIdentities/[^/]+$`)
	reAdminName = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
)

// Validate reports every problem of the configuration at once; errors wrap
// providers.ErrBadConfig.
func (c ComputeConfig) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !reRG.MatchString(c.ResourceGroup) {
		bad("resource_group: %q is not a resource group name (1-90 letters, digits, '-', '_', '.', '(', ')')", c.ResourceGroup)
	}
	if len(c.Subnets) == 0 {
		bad("subnets: none; map each location to a subnet ID such as /subscriptions/SUB/resourceGroups/RG/providers/Microsoft.Network/virtualNetworks/VNET/subnets/gpu")
	}
	for _, loc := range sortedKeys(c.Subnets) {
		if !reSubnetID.MatchString(c.Subnets[loc]) {
			bad("subnets.%s: %q is not a subnet resource ID (/subscriptions/SUB/resourceGroups/RG/providers/Microsoft.Network/virtualNetworks/VNET/subnets/NAME)", loc, c.Subnets[loc])
		}
		if loc != strings.ToLower(loc) || strings.ContainsAny(loc, " -") {
			bad("subnets: %q is not a location name such as eastus", loc)
		}
	}
	if !reURN.MatchString(c.Image) && !reImageID.MatchString(c.Image) {
		bad("image: %q is neither a URN publisher:offer:sku:version (microsoft-dsvm:ubuntu-hpc:2204:latest) nor an image resource ID", c.Image)
	}
	if c.AdminUsername != "" && (!reAdminName.MatchString(c.AdminUsername) || c.AdminUsername == "root" || c.AdminUsername == "admin") {
		bad("admin_username: %q is not allowed (lower-case letters, digits, '_' and '-'; not root or admin)", c.AdminUsername)
	}
	if c.SSHPublicKey != "" {
		if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(c.SSHPublicKey)); err != nil {
			bad("ssh_public_key: not an OpenSSH public key (ssh-rsa AAAA… or ssh-ed25519 AAAA…): %v", err)
		}
	}
	if c.OSDiskGB < 0 || (c.OSDiskGB > 0 && c.OSDiskGB < 30) {
		bad("os_disk_gb: %d, want at least 30 (or 0 for 128)", c.OSDiskGB)
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			bad("endpoint: %q is not a URL such as https://management.azure.com", c.Endpoint)
		}
	}
	if c.Identity != "" && !reIdentity.MatchString(c.Identity) {
		bad("identity: %q is not a user-assigned identity resource ID", c.Identity)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("azure compute: %w: %w", providers.ErrBadConfig, errors.Join(errs...))
}

// NewCompute validates cfg and builds a Compute. It asks the credential for
// an ARM token once, so missing credentials fail here (wrapping
// providers.ErrNoCredentials).
func NewCompute(ctx context.Context, cfg ComputeConfig) (*Compute, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AdminUsername == "" {
		cfg.AdminUsername = "gpubroker"
	}
	if cfg.OSDiskGB == 0 {
		cfg.OSDiskGB = 128
	}
	if cfg.OSDiskType == "" {
		cfg.OSDiskType = string(armcompute.StorageAccountTypesStandardSSDLRS)
	}
	if cfg.PollFrequency <= 0 {
		cfg.PollFrequency = 5 * time.Second
	}
	if cfg.Cloud.Services == nil {
		cfg.Cloud = cloud.AzurePublic
	}
	if cfg.Endpoint != "" {
		// Copy: cloud.AzurePublic's map is shared by every client.
		svcs := make(map[cloud.ServiceName]cloud.ServiceConfiguration, len(cfg.Cloud.Services))
		for k, v := range cfg.Cloud.Services {
			svcs[k] = v
		}
		rm := svcs[cloud.ResourceManager]
		rm.Endpoint = cfg.Endpoint
		svcs[cloud.ResourceManager] = rm
		cfg.Cloud.Services = svcs
	}
	if cfg.Retry.MaxRetries == 0 {
		cfg.Retry.MaxRetries = 4
	}
	if cfg.SubscriptionID == "" {
		cfg.SubscriptionID = os.Getenv("AZURE_SUBSCRIPTION_ID")
	}
	if cfg.SubscriptionID == "" {
		return nil, fmt.Errorf("azure compute: no subscription (set subscription_id or AZURE_SUBSCRIPTION_ID): %w", providers.ErrNoCredentials)
	}
	if cfg.Credential == nil {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("azure compute: default credential: %w: %w", providers.ErrNoCredentials, err)
		}
		cfg.Credential = cred
	}
	audience := cfg.Cloud.Services[cloud.ResourceManager].Audience
	if _, err := cfg.Credential.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{audience + "/.default"}}); err != nil {
		return nil, fmt.Errorf("azure compute: getting an ARM token: %w: %w", providers.ErrNoCredentials, err)
	}
	copts := policy.ClientOptions{Cloud: cfg.Cloud, Retry: cfg.Retry, InsecureAllowCredentialWithHTTP: cfg.InsecureAllowCredentialWithHTTP}
	if cfg.HTTPClient != nil {
		copts.Transport = cfg.HTTPClient
	}
	aopts := &arm.ClientOptions{ClientOptions: copts, DisableRPRegistration: true}
	vms, err := armcompute.NewVirtualMachinesClient(cfg.SubscriptionID, cfg.Credential, aopts)
	if err != nil {
		return nil, fmt.Errorf("azure compute: virtual machines client: %w", err)
	}
	disks, err := armcompute.NewDisksClient(cfg.SubscriptionID, cfg.Credential, aopts)
	if err != nil {
		return nil, fmt.Errorf("azure compute: disks client: %w", err)
	}
	nics, err := armnetwork.NewInterfacesClient(cfg.SubscriptionID, cfg.Credential, aopts)
	if err != nil {
		return nil, fmt.Errorf("azure compute: network interfaces client: %w", err)
	}
	key := cfg.SSHPublicKey
	if key == "" {
		// Azure Linux VMs need a key or a password; a key whose private
		// half is dropped here lets nobody in.
		k, err := rsa.GenerateKey(rand.Reader, 3072)
		if err != nil {
			return nil, fmt.Errorf("azure compute: throw-away SSH key: %w", err)
		}
		pub, err := ssh.NewPublicKey(&k.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("azure compute: throw-away SSH key: %w", err)
		}
		key = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	}
	return &Compute{
		cfg: cfg, log: cfg.Logger.With("cloud", "azure"), vms: vms, nics: nics, disks: disks, sshKey: key,
		poll: &runtime.PollUntilDoneOptions{Frequency: cfg.PollFrequency},
	}, nil
}

var reVMBad = regexp.MustCompile(`[^a-z0-9-]+`)

// VMName is the VM name for a launch: the request's name made valid plus a
// hash of the token. ARM PUTs are idempotent by name, so a retry with the
// same token updates the first VM instead of making a second.
func VMName(name, token string) string {
	n := strings.Trim(reVMBad.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if n == "" {
		n = "gpb"
	}
	if len(n) > 64-11-4 { // room for "-<hash>" and the "-nic" of its NIC
		n = strings.TrimRight(n[:64-11-4], "-")
	}
	sum := sha256.Sum256([]byte(token))
	return n + "-" + hex.EncodeToString(sum[:])[:10]
}

func nicName(vm string) string  { return vm + "-nic" }
func diskName(vm string) string { return vm + "-osdisk" }

var reTagBad = regexp.MustCompile(`[<>%&\\?/]`)

// tagName makes a tag key valid as an Azure tag name (none of <>%&\?/).
func tagName(k string) string { return reTagBad.ReplaceAllString(k, "_") }

func (c *Compute) azureTags(tags map[string]string) map[string]*string {
	out := map[string]*string{}
	for k, v := range tags {
		out[tagName(k)] = to.Ptr(v)
	}
	if b, _ := json.Marshal(tags); len(b) <= 256 {
		out[TagsKey] = to.Ptr(string(b))
	}
	return out
}

// mapErr maps an ARM error by its code (OperationNotAllowed by code and
// status together: quota on 409, throttling on 429).
func mapErr(err error) (string, error) {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return "", err
	}
	var s error
	switch re.ErrorCode {
	case "ZonalAllocationFailed", "AllocationFailed", "OverconstrainedAllocationRequest", "OverconstrainedZonalAllocationRequest",
		"SkuNotAvailable", "ZonalAllocationFailedVmSizeNotAvailable":
		s = providers.ErrInsufficientCapacity
	case "OperationNotAllowed":
		// Quota on a 409, throttling on a 429. A 409 that names no quota
		// is an operation already under way on the resource (a retried
		// PUT racing the first): try again later.
		switch {
		case re.StatusCode == http.StatusTooManyRequests:
			s = providers.ErrThrottled
		case strings.Contains(strings.ToLower(re.Error()), "quota"):
			s = providers.ErrQuotaExceeded
		default:
			s = providers.ErrThrottled
		}
	case "AnotherOperationInProgress", "Conflict":
		s = providers.ErrThrottled
	case "QuotaExceeded", "SpotQuotaExceeded":
		s = providers.ErrQuotaExceeded
	case "TooManyRequests", "SubscriptionRequestsThrottled", "RetryableError", "NicReservedForAnotherVm":
		s = providers.ErrThrottled
	case "AuthorizationFailed", "LinkedAuthorizationFailed", "AuthenticationFailed", "InvalidAuthenticationToken",
		"ExpiredAuthenticationToken", "InvalidAuthenticationTokenTenant":
		s = providers.ErrUnauthorized
	case "ResourceNotFound", "NotFound":
		s = providers.ErrNotFound
	case "InvalidParameter", "ImageNotFound", "PlatformImageNotFound", "InvalidResourceReference", "BadRequest",
		"ResourceGroupNotFound", "MissingSubscriptionRegistration", "InvalidRequestFormat", "PropertyChangeNotAllowed",
		"VMMarketplaceInvalidInput", "InvalidTemplate", "SubnetNotFound", "InvalidSubnet":
		s = providers.ErrBadConfig
	}
	if s == nil {
		return re.ErrorCode, err
	}
	return re.ErrorCode, fmt.Errorf("%w: %w", s, err)
}

// Launch creates a NIC in the location's subnet, then the VM (Spot with
// eviction policy Delete and no price cap, or Regular), and waits for both
// long-running operations. An allocation failure arrives through the VM's
// operation and leaves a failed VM with its NIC (and maybe its disk): they
// are deleted before the error is returned. A launch cut short by ctx is
// not cleaned up: it may still succeed, and a retry with the same token
// adopts it.
func (c *Compute) Launch(ctx context.Context, req providers.LaunchRequest) (providers.Instance, error) {
	if err := providers.CheckLaunchRequest(pricing.Azure, req); err != nil {
		return providers.Instance{}, fmt.Errorf("azure launch: %w", err)
	}
	o := req.Candidates[0]
	pool := providers.PoolKey{Cloud: pricing.Azure, Zone: o.Zone, InstanceType: o.InstanceType, Capacity: req.Capacity}
	fail := func(stage string, err error) (providers.Instance, error) {
		code, mapped := mapErr(err)
		return providers.Instance{}, &providers.LaunchError{Pool: pool, Code: code, Err: fmt.Errorf("%s: %w", stage, mapped)}
	}
	subnet, ok := c.cfg.Subnets[o.Region]
	if !ok {
		return providers.Instance{}, &providers.LaunchError{Pool: pool, Code: "NoSubnet",
			Err: fmt.Errorf("%w: no subnet configured for location %s", providers.ErrBadConfig, o.Region)}
	}
	// Custom data is at most 64 KiB before base64.
	if len(req.UserData) > 64<<10 {
		return providers.Instance{}, &providers.LaunchError{Pool: pool, Code: "UserDataTooLarge",
			Err: fmt.Errorf("%w: user data is %d bytes; Azure custom data takes at most 65536", providers.ErrBadConfig, len(req.UserData))}
	}
	name := VMName(req.Name, req.ClientToken)
	tags := c.azureTags(req.Tags)
	rg := c.cfg.ResourceGroup

	nicPoller, err := c.nics.BeginCreateOrUpdate(ctx, rg, nicName(name), armnetwork.Interface{
		Location: to.Ptr(o.Region),
		Tags:     tags,
		Properties: &armnetwork.InterfacePropertiesFormat{
			EnableAcceleratedNetworking: to.Ptr(c.cfg.AcceleratedNetworking),
			IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{
				Name: to.Ptr("ipconfig1"),
				Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
					Subnet:                    &armnetwork.Subnet{ID: to.Ptr(subnet)},
					PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic),
					Primary:                   to.Ptr(true),
				},
			}},
		},
	}, nil)
	var nic armnetwork.InterfacesClientCreateOrUpdateResponse
	if err == nil {
		nic, err = nicPoller.PollUntilDone(ctx, c.poll)
	}
	if err != nil {
		if failedForGood(ctx, err) {
			c.cleanup(ctx, name)
		}
		return fail("network interface "+nicName(name), err)
	}

	vm := c.vmSpec(req, o, name, tags, str(nic.ID))
	vmPoller, err := c.vms.BeginCreateOrUpdate(ctx, rg, name, vm, nil)
	var res armcompute.VirtualMachinesClientCreateOrUpdateResponse
	if err == nil {
		res, err = vmPoller.PollUntilDone(ctx, c.poll)
	}
	if err != nil {
		if failedForGood(ctx, err) {
			c.cleanup(ctx, name)
		}
		return fail("virtual machine "+name, err)
	}
	inst, _ := instanceOf(res.VirtualMachine)
	if inst.LaunchedAt.IsZero() {
		inst.LaunchedAt = c.cfg.Now()
	}
	inst.State = providers.StatePending
	if p := nic.Properties; p != nil && len(p.IPConfigurations) > 0 && p.IPConfigurations[0].Properties != nil {
		inst.PrivateIP = str(p.IPConfigurations[0].Properties.PrivateIPAddress)
	}
	return inst, nil
}

func (c *Compute) vmSpec(req providers.LaunchRequest, o pricing.Offer, name string, tags map[string]*string, nicID string) armcompute.VirtualMachine {
	img := &armcompute.ImageReference{}
	if p := strings.Split(c.cfg.Image, ":"); len(p) == 4 && !strings.HasPrefix(c.cfg.Image, "/") {
		img.Publisher, img.Offer, img.SKU, img.Version = &p[0], &p[1], &p[2], &p[3]
	} else {
		img.ID = to.Ptr(c.cfg.Image)
	}
	props := &armcompute.VirtualMachineProperties{
		HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypes(o.InstanceType))},
		StorageProfile: &armcompute.StorageProfile{
			ImageReference: img,
			OSDisk: &armcompute.OSDisk{
				Name:         to.Ptr(diskName(name)),
				CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage),
				DeleteOption: to.Ptr(armcompute.DiskDeleteOptionTypesDelete),
				DiskSizeGB:   to.Ptr(c.cfg.OSDiskGB),
				ManagedDisk:  &armcompute.ManagedDiskParameters{StorageAccountType: to.Ptr(armcompute.StorageAccountTypes(c.cfg.OSDiskType))},
			},
		},
		OSProfile: &armcompute.OSProfile{
			ComputerName:  to.Ptr(name),
			AdminUsername: to.Ptr(c.cfg.AdminUsername),
			CustomData:    to.Ptr(base64.StdEncoding.EncodeToString([]byte(req.UserData))),
			LinuxConfiguration: &armcompute.LinuxConfiguration{
				DisablePasswordAuthentication: to.Ptr(true),
				SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{
					Path:    to.Ptr("/home/" + c.cfg.AdminUsername + "/.ssh/authorized_keys"),
					KeyData: to.Ptr(c.sshKey),
				}}},
			},
		},
		NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{
			ID: to.Ptr(nicID),
			Properties: &armcompute.NetworkInterfaceReferenceProperties{
				Primary: to.Ptr(true), DeleteOption: to.Ptr(armcompute.DeleteOptionsDelete),
			},
		}}},
	}
	if req.Capacity == pricing.Spot {
		props.Priority = to.Ptr(armcompute.VirtualMachinePriorityTypesSpot)
		props.EvictionPolicy = to.Ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
		// -1: pay up to the on-demand price, never evicted for price.
		props.BillingProfile = &armcompute.BillingProfile{MaxPrice: to.Ptr(-1.0)}
	} else {
		props.Priority = to.Ptr(armcompute.VirtualMachinePriorityTypesRegular)
	}
	vm := armcompute.VirtualMachine{Location: to.Ptr(o.Region), Tags: tags, Properties: props}
	if o.Zone != "" {
		vm.Zones = []*string{to.Ptr(o.Zone)}
	}
	if c.cfg.Identity != "" {
		vm.Identity = &armcompute.VirtualMachineIdentity{
			Type:                   to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{c.cfg.Identity: {}},
		}
	}
	return vm
}

// failedForGood reports whether a launch error means the launch is over:
// capacity, quota, configuration or permission. A launch cut short by ctx,
// throttled, or racing an operation still under way may yet succeed, and a
// retry with the same token adopts it, so it is not cleaned up.
func failedForGood(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	_, mapped := mapErr(err)
	for _, s := range []error{providers.ErrInsufficientCapacity, providers.ErrQuotaExceeded, providers.ErrBadConfig, providers.ErrUnauthorized} {
		if errors.Is(mapped, s) {
			return true
		}
	}
	return false
}

// cleanup deletes what a failed launch left, logging what it could not.
func (c *Compute) cleanup(ctx context.Context, name string) {
	if err := c.deleteAll(ctx, name); err != nil {
		c.log.Warn("cleaning up after a failed launch", "vm", name, "err", err)
	}
}

// deleteAll deletes the VM, then its NIC and OS disk (which deleteOption
// Delete normally takes with it; a VM that never got them, or a NIC left
// by a failed PUT, is deleted here). Already gone is success.
func (c *Compute) deleteAll(ctx context.Context, name string) error {
	rg := c.cfg.ResourceGroup
	gone := func(err error) error {
		if err == nil {
			return nil
		}
		_, mapped := mapErr(err)
		if errors.Is(mapped, providers.ErrNotFound) {
			return nil
		}
		return mapped
	}
	vp, err := c.vms.BeginDelete(ctx, rg, name, nil)
	if err == nil {
		_, err = vp.PollUntilDone(ctx, c.poll)
	}
	if err := gone(err); err != nil {
		return fmt.Errorf("deleting VM %s: %w", name, err)
	}
	var errs []error
	np, err := c.nics.BeginDelete(ctx, rg, nicName(name), nil)
	if err == nil {
		_, err = np.PollUntilDone(ctx, c.poll)
	}
	if err := gone(err); err != nil {
		errs = append(errs, fmt.Errorf("deleting NIC %s: %w", nicName(name), err))
	}
	dp, err := c.disks.BeginDelete(ctx, rg, diskName(name), nil)
	if err == nil {
		_, err = dp.PollUntilDone(ctx, c.poll)
	}
	if err := gone(err); err != nil {
		errs = append(errs, fmt.Errorf("deleting disk %s: %w", diskName(name), err))
	}
	return errors.Join(errs...)
}

// Terminate deletes the VM, its NIC and its OS disk. Already gone is not
// an error. A NIC Azure still reserves for the deleted VM
// (NicReservedForAnotherVm, up to 180 s) fails with ErrThrottled: call
// again later.
func (c *Compute) Terminate(ctx context.Context, ref providers.InstanceRef) error {
	if err := c.deleteAll(ctx, ref.ID); err != nil {
		return fmt.Errorf("azure terminate: %w", err)
	}
	return nil
}

// List returns the VMs of the resource group carrying every tag of f
// (names sanitised as Launch does) in f.Regions (all when empty), following
// every page. The state comes from the provisioning state: the power state
// would cost one call per VM; a Spot VM evicted with policy Delete is
// simply gone.
func (c *Compute) List(ctx context.Context, f providers.Filter) ([]providers.Instance, error) {
	want := map[string]bool{}
	for _, r := range f.Regions {
		want[strings.ToLower(r)] = true
	}
	pager := c.vms.NewListPager(c.cfg.ResourceGroup, nil)
	var out []providers.Instance
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			_, mapped := mapErr(err)
			return nil, fmt.Errorf("azure list: virtual machines in %s: %w", c.cfg.ResourceGroup, mapped)
		}
		for _, vm := range page.Value {
			if vm == nil || !hasTags(vm.Tags, f.Tags) {
				continue
			}
			inst, verbatim := instanceOf(*vm)
			if len(want) > 0 && !want[strings.ToLower(inst.Region)] {
				continue
			}
			// Sanitised names can collide ("a/b" and "a_b"): with the
			// verbatim tags at hand, match exactly.
			if verbatim && !providers.HasTags(inst.Tags, f.Tags) {
				continue
			}
			out = append(out, inst)
		}
	}
	return out, nil
}

// hasTags matches tag names case-insensitively, as Azure treats them.
func hasTags(have map[string]*string, want map[string]string) bool {
	lower := map[string]string{}
	for k, v := range have {
		lower[strings.ToLower(k)] = str(v)
	}
	for k, v := range want {
		got, ok := lower[strings.ToLower(tagName(k))]
		if !ok || got != v {
			return false
		}
	}
	return true
}

// instanceOf converts a VM; verbatim says whether its tags came from the
// TagsKey copy.
func instanceOf(vm armcompute.VirtualMachine) (providers.Instance, bool) {
	inst := providers.Instance{
		InstanceRef: providers.InstanceRef{Cloud: pricing.Azure, Region: str(vm.Location), ID: str(vm.Name)},
		Capacity:    pricing.OnDemand,
		State:       providers.StateUnknown,
		Tags:        map[string]string{},
	}
	if len(vm.Zones) > 0 {
		inst.Zone = str(vm.Zones[0])
	}
	if p := vm.Properties; p != nil {
		if p.HardwareProfile != nil && p.HardwareProfile.VMSize != nil {
			inst.InstanceType = string(*p.HardwareProfile.VMSize)
		}
		if p.Priority != nil && (*p.Priority == armcompute.VirtualMachinePriorityTypesSpot || *p.Priority == armcompute.VirtualMachinePriorityTypesLow) {
			inst.Capacity = pricing.Spot
		}
		if p.TimeCreated != nil {
			inst.LaunchedAt = *p.TimeCreated
		}
		switch str(p.ProvisioningState) {
		case "Creating", "Updating", "Migrating":
			inst.State = providers.StatePending
		case "Succeeded":
			inst.State = providers.StateRunning
		case "Deleting":
			inst.State = providers.StateStopping
		// A VM whose allocation failed never runs: the fleet replaces it.
		case "Failed", "Canceled":
			inst.State = providers.StateTerminated
		}
	}
	raw := ""
	for k, v := range vm.Tags {
		if k == TagsKey {
			raw = str(v)
			continue
		}
		inst.Tags[k] = str(v)
	}
	if raw != "" {
		var orig map[string]string
		if json.Unmarshal([]byte(raw), &orig) == nil && orig != nil {
			inst.Tags = orig
			return inst, true
		}
	}
	return inst, false
}
