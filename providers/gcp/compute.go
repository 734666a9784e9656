package gcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/auth/credentials"
	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/googleapis/gax-go/v2"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"
	"google.golang.org/protobuf/proto"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// TagsMetadataKey is the instance metadata entry holding the launch
// request's tags verbatim. Labels must be lower-case and may not hold "/"
// or ".", so List filters on the sanitised labels but returns these.
const TagsMetadataKey = "gpubroker-tags"

// ComputeConfig configures a Compute.
type ComputeConfig struct {
	// Project instances live in; empty means the credentials' project.
	Project string
	// Regions listed when a Filter names none; empty means every zone.
	Regions []string
	// Image is the boot image, e.g.
	// "projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11"
	// (a family or an image; required).
	Image string
	// DiskSizeGB (default 100) and DiskType (default "pd-balanced") of the
	// boot disk; it is deleted with the instance.
	DiskSizeGB int64
	DiskType   string
	// Network is the VPC ("global/networks/default" when empty);
	// Subnetworks maps region → subnetwork for custom-mode VPCs.
	Network     string
	Subnetworks map[string]string
	// ExternalIP gives instances an ephemeral public address; without it
	// they need Cloud NAT to reach the broker.
	ExternalIP bool
	// NetworkTags are the instances' firewall tags.
	NetworkTags []string
	// ServiceAccount (email) instances run as; empty means none attached.
	ServiceAccount string
	// SSHKeys is the "ssh-keys" metadata value ("user:ssh-ed25519 …");
	// optional.
	SSHKeys string
	// TerminationAction of Spot VMs: "DELETE" (default; the disk goes too)
	// or "STOP".
	TerminationAction string

	// Endpoint overrides the Compute Engine endpoint (Private Service
	// Connect, proxies, test servers).
	Endpoint string
	// WithoutAuthentication sends requests without credentials; for local
	// test servers only.
	WithoutAuthentication bool
	HTTPClient            *http.Client
	ClientOptions         []option.ClientOption
	Retry                 Retry
	Logger                *slog.Logger
	Now                   func() time.Time
}

// instancesAPI is the part of compute.InstancesClient that Compute calls.
type instancesAPI interface {
	Insert(context.Context, *computepb.InsertInstanceRequest, ...gax.CallOption) (*compute.Operation, error)
	Delete(context.Context, *computepb.DeleteInstanceRequest, ...gax.CallOption) (*compute.Operation, error)
	Get(context.Context, *computepb.GetInstanceRequest, ...gax.CallOption) (*computepb.Instance, error)
	AggregatedList(context.Context, *computepb.AggregatedListInstancesRequest, ...gax.CallOption) *compute.InstancesScopedListPairIterator
}

// zoneOpsAPI is the part of compute.ZoneOperationsClient that Compute calls.
type zoneOpsAPI interface {
	Wait(context.Context, *computepb.WaitZoneOperationRequest, ...gax.CallOption) (*computepb.Operation, error)
}

var (
	_ instancesAPI      = (*compute.InstancesClient)(nil)
	_ zoneOpsAPI        = (*compute.ZoneOperationsClient)(nil)
	_ providers.Compute = (*Compute)(nil)
)

// Compute launches, lists and deletes Compute Engine instances. It is safe
// for concurrent use.
type Compute struct {
	cfg      ComputeConfig
	log      *slog.Logger
	inst     instancesAPI
	ops      zoneOpsAPI
	callOpts []gax.CallOption
	closers  []func() error
}

var reImage = regexp.MustCompile(`^(https://www\.googleapis\.com/compute/v1/)?projects/[a-z0-9-]+/global/images/(family/)?[a-z0-9-]+$`)

// Validate reports every problem of the configuration at once; errors wrap
// providers.ErrBadConfig.
func (c ComputeConfig) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !reImage.MatchString(c.Image) {
		bad("image: %q is not an image path such as projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11", c.Image)
	}
	if c.DiskSizeGB < 0 || (c.DiskSizeGB > 0 && c.DiskSizeGB < 10) {
		bad("disk_size_gb: %d, want at least 10 (or 0 for 100)", c.DiskSizeGB)
	}
	switch c.TerminationAction {
	case "", "DELETE", "STOP":
	default:
		bad("termination_action: %q, want DELETE or STOP", c.TerminationAction)
	}
	if c.ServiceAccount != "" && !strings.Contains(c.ServiceAccount, "@") {
		bad("service_account: %q is not an e-mail such as gpubroker-vm@PROJECT.iam.gserviceaccount.com", c.ServiceAccount)
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			bad("endpoint: %q is not a URL such as https://compute.googleapis.com", c.Endpoint)
		}
	}
	for region, sn := range c.Subnetworks {
		if !strings.Contains(sn, "subnetworks/") {
			bad("subnetworks.%s: %q is not a path such as projects/PROJECT/regions/%s/subnetworks/NAME", region, sn, region)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("gcp compute: %w: %w", providers.ErrBadConfig, errors.Join(errs...))
}

// NewCompute validates cfg and builds a Compute. Credentials come from
// Application Default Credentials; none is an error wrapping
// providers.ErrNoCredentials.
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
	if cfg.Retry.Attempts <= 0 {
		cfg.Retry.Attempts = 5
	}
	if cfg.Retry.Initial <= 0 {
		cfg.Retry.Initial = 500 * time.Millisecond
	}
	if cfg.Retry.Max <= 0 {
		cfg.Retry.Max = 30 * time.Second
	}
	if cfg.DiskSizeGB == 0 {
		cfg.DiskSizeGB = 100
	}
	if cfg.DiskType == "" {
		cfg.DiskType = "pd-balanced"
	}
	if cfg.Network == "" {
		cfg.Network = "global/networks/default"
	}
	if cfg.TerminationAction == "" {
		cfg.TerminationAction = "DELETE"
	}
	base := http.DefaultTransport
	var timeout time.Duration
	if cfg.HTTPClient != nil {
		if cfg.HTTPClient.Transport != nil {
			base = cfg.HTTPClient.Transport
		}
		timeout = cfg.HTTPClient.Timeout
	}
	opts := append([]option.ClientOption(nil), cfg.ClientOptions...)
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.Endpoint))
	}
	if cfg.WithoutAuthentication {
		if cfg.Project == "" {
			return nil, fmt.Errorf("gcp compute: %w: a project is required without authentication", providers.ErrBadConfig)
		}
		opts = append(opts, option.WithoutAuthentication(), option.WithHTTPClient(&http.Client{Transport: base, Timeout: timeout}))
	} else {
		creds, err := detectCredentials(ctx, &credentials.DetectOptions{Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}})
		if err != nil {
			return nil, fmt.Errorf("gcp compute: application default credentials: %w: %w", providers.ErrNoCredentials, err)
		}
		if cfg.Project == "" {
			p, err := creds.ProjectID(ctx)
			if err != nil || p == "" {
				return nil, fmt.Errorf("gcp compute: %w: no project configured and none in the credentials (set project or GOOGLE_CLOUD_PROJECT)", providers.ErrBadConfig)
			}
			cfg.Project = p
		}
		tr, err := htransport.NewTransport(ctx, base, option.WithAuthCredentials(creds))
		if err != nil {
			return nil, fmt.Errorf("gcp compute: transport: %w", err)
		}
		opts = append(opts, option.WithHTTPClient(&http.Client{Transport: tr, Timeout: timeout}))
	}
	ic, err := compute.NewInstancesRESTClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcp compute: instances client: %w", err)
	}
	oc, err := compute.NewZoneOperationsRESTClient(ctx, opts...)
	if err != nil {
		ic.Close()
		return nil, fmt.Errorf("gcp compute: zone operations client: %w", err)
	}
	return &Compute{
		cfg: cfg, log: cfg.Logger.With("cloud", "gcp"), inst: ic, ops: oc,
		// Mutations are retried too: every insert and delete carries a
		// requestId, so a repeat is answered with the first operation.
		callOpts: []gax.CallOption{gax.WithRetry(func() gax.Retryer { return newRetryer(cfg.Retry) })},
		closers:  []func() error{ic.Close, oc.Close},
	}, nil
}

// Close releases the clients.
func (c *Compute) Close() error {
	var errs []error
	for _, f := range c.closers {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

// RequestID turns a launch token into the UUID Compute Engine wants as
// requestId, deterministically (a name-based, version-5-shaped UUID).
func RequestID(token string) string {
	s := sha256.Sum256([]byte("gpubroker:" + token))
	s[6] = s[6]&0x0f | 0x50
	s[8] = s[8]&0x3f | 0x80
	h := hex.EncodeToString(s[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

var reNameBad = regexp.MustCompile(`[^a-z0-9-]+`)

// InstanceName is the instance name for a launch: the request's name made
// valid ([a-z]([-a-z0-9]{0,61}[a-z0-9])?) plus a hash of the token. Being
// deterministic, a retry long after the requestId is forgotten still finds
// the first instance (409 alreadyExists) instead of making a second.
func InstanceName(name, token string) string {
	n := reNameBad.ReplaceAllString(strings.ToLower(name), "-")
	n = strings.Trim(n, "-")
	if n == "" || n[0] < 'a' || n[0] > 'z' {
		n = "gpb-" + n
	}
	sum := sha256.Sum256([]byte(token))
	suffix := hex.EncodeToString(sum[:])[:10]
	if len(n) > 63-11 {
		n = strings.TrimRight(n[:63-11], "-")
	}
	return n + "-" + suffix
}

var reLabelBad = regexp.MustCompile(`[^a-z0-9_-]`)

// Label makes a tag key or value a valid label part: lower case, only
// letters, digits, "_" and "-", at most 63 characters; keys start with a
// letter.
func Label(s string, key bool) string {
	l := reLabelBad.ReplaceAllString(strings.ToLower(s), "_")
	if key && (l == "" || l[0] < 'a' || l[0] > 'z') {
		l = "k" + l
	}
	if len(l) > 63 {
		l = l[:63]
	}
	return l
}

// n1Accelerator splits an N1 offer's type ("n1-standard-8+nvidia-tesla-t4x1",
// as the price source names it) into machine type and GPUs; an N1 type
// without the suffix takes the GPUs from the offer. Other families have
// their GPUs built in.
func n1Accelerator(o pricing.Offer) (machine, accel string, count int32, err error) {
	machine, rest, ok := strings.Cut(o.InstanceType, "+")
	if ok {
		i := strings.LastIndex(rest, "x")
		n, perr := strconv.Atoi(rest[i+1:])
		if i <= 0 || perr != nil || n <= 0 {
			return "", "", 0, fmt.Errorf("instance type %q: want MACHINE+ACCELERATORxCOUNT", o.InstanceType)
		}
		return machine, rest[:i], int32(n), nil
	}
	if !strings.HasPrefix(machine, "n1-") {
		return machine, "", 0, nil
	}
	names := map[pricing.GPUModel]string{"T4": "nvidia-tesla-t4", "V100": "nvidia-tesla-v100", "P100": "nvidia-tesla-p100", "P4": "nvidia-tesla-p4"}
	if a, ok := names[o.GPU]; ok && o.GPUCount > 0 {
		return machine, a, int32(o.GPUCount), nil
	}
	return machine, "", 0, nil
}

// Launch inserts one instance for the first candidate, waits for the zonal
// operation and maps its errors (which may arrive only in a DONE
// operation's body). A Spot launch sets provisioningModel SPOT with the
// configured termination action; every GPU instance sets onHostMaintenance
// TERMINATE, as GPUs cannot live-migrate.
func (c *Compute) Launch(ctx context.Context, req providers.LaunchRequest) (providers.Instance, error) {
	if err := providers.CheckLaunchRequest(pricing.GCP, req); err != nil {
		return providers.Instance{}, fmt.Errorf("gcp launch: %w", err)
	}
	o := req.Candidates[0]
	pool := providers.PoolKey{Cloud: pricing.GCP, Zone: o.Zone, InstanceType: o.InstanceType, Capacity: req.Capacity}
	fail := func(code string, err error) (providers.Instance, error) {
		return providers.Instance{}, &providers.LaunchError{Pool: pool, Code: code, Err: err}
	}
	if o.Zone == "" {
		return fail("NoZone", fmt.Errorf("%w: GCP instances are zonal; candidate %s in %s names no zone", providers.ErrBadConfig, o.InstanceType, o.Region))
	}
	// A metadata value holds at most 256 KiB.
	if len(req.UserData) > 256<<10 {
		return fail("UserDataTooLarge", fmt.Errorf("%w: user data is %d bytes; a metadata value takes at most 262144", providers.ErrBadConfig, len(req.UserData)))
	}
	machine, accel, count, err := n1Accelerator(o)
	if err != nil {
		return fail("BadInstanceType", fmt.Errorf("%w: %v", providers.ErrBadConfig, err))
	}
	name := InstanceName(req.Name, req.ClientToken)
	inst := c.instanceSpec(req, o, name, machine, accel, count)
	op, err := c.inst.Insert(ctx, &computepb.InsertInstanceRequest{
		Project: c.cfg.Project, Zone: o.Zone, InstanceResource: inst, RequestId: proto.String(RequestID(req.ClientToken)),
	}, c.callOpts...)
	if err != nil {
		if reasonOf(err) == "alreadyExists" {
			// The first insert of this token went through (its requestId
			// may be forgotten by now): adopt that instance.
			got, gerr := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: c.cfg.Project, Zone: o.Zone, Instance: name}, c.callOpts...)
			if gerr == nil {
				inst, _ := instanceOf(got)
				return inst, nil
			}
			err = gerr
		}
		code, s := mapAPIErr(err)
		return fail(code, fmt.Errorf("instances.insert %s: %w", name, s))
	}
	if err := c.wait(ctx, o.Zone, op.Proto()); err != nil {
		var oe *opError
		if errors.As(err, &oe) {
			return fail(oe.code, fmt.Errorf("instances.insert %s: %w", name, err))
		}
		code, s := mapAPIErr(err)
		return fail(code, fmt.Errorf("instances.insert %s: waiting: %w", name, s))
	}
	tags := map[string]string{}
	for k, v := range req.Tags {
		tags[k] = v
	}
	return providers.Instance{
		InstanceRef:  providers.InstanceRef{Cloud: pricing.GCP, Region: o.Region, Zone: o.Zone, ID: name},
		InstanceType: o.InstanceType,
		Capacity:     req.Capacity,
		State:        providers.StatePending,
		Tags:         tags,
		LaunchedAt:   c.cfg.Now(),
	}, nil
}

func (c *Compute) instanceSpec(req providers.LaunchRequest, o pricing.Offer, name, machine, accel string, count int32) *computepb.Instance {
	zoneURL := "projects/" + c.cfg.Project + "/zones/" + o.Zone
	labels := map[string]string{}
	for k, v := range req.Tags {
		labels[Label(k, true)] = Label(v, false)
	}
	tagsJSON, _ := json.Marshal(req.Tags)
	meta := []*computepb.Items{
		{Key: proto.String("startup-script"), Value: proto.String(req.UserData)},
		// cloud-init images read user-data; both get the same script.
		{Key: proto.String("user-data"), Value: proto.String(req.UserData)},
		{Key: proto.String(TagsMetadataKey), Value: proto.String(string(tagsJSON))},
	}
	if c.cfg.SSHKeys != "" {
		meta = append(meta, &computepb.Items{Key: proto.String("ssh-keys"), Value: proto.String(c.cfg.SSHKeys)})
	}
	nic := &computepb.NetworkInterface{Network: proto.String(c.cfg.Network)}
	if sn, ok := c.cfg.Subnetworks[o.Region]; ok {
		nic.Subnetwork = proto.String(sn)
	}
	if c.cfg.ExternalIP {
		nic.AccessConfigs = []*computepb.AccessConfig{{Name: proto.String("External NAT"), Type: proto.String("ONE_TO_ONE_NAT")}}
	}
	sched := &computepb.Scheduling{
		OnHostMaintenance: proto.String("TERMINATE"),
		AutomaticRestart:  proto.Bool(req.Capacity != pricing.Spot),
	}
	if req.Capacity == pricing.Spot {
		sched.ProvisioningModel = proto.String("SPOT")
		sched.InstanceTerminationAction = proto.String(c.cfg.TerminationAction)
	} else {
		sched.ProvisioningModel = proto.String("STANDARD")
	}
	in := &computepb.Instance{
		Name:        proto.String(name),
		MachineType: proto.String(zoneURL + "/machineTypes/" + machine),
		Labels:      labels,
		Metadata:    &computepb.Metadata{Items: meta},
		Scheduling:  sched,
		Disks: []*computepb.AttachedDisk{{
			Boot: proto.Bool(true), AutoDelete: proto.Bool(true),
			InitializeParams: &computepb.AttachedDiskInitializeParams{
				SourceImage: proto.String(c.cfg.Image),
				DiskSizeGb:  proto.Int64(c.cfg.DiskSizeGB),
				DiskType:    proto.String(zoneURL + "/diskTypes/" + c.cfg.DiskType),
				Labels:      labels,
			},
		}},
		NetworkInterfaces: []*computepb.NetworkInterface{nic},
	}
	if accel != "" {
		in.GuestAccelerators = []*computepb.AcceleratorConfig{{
			AcceleratorType: proto.String(zoneURL + "/acceleratorTypes/" + accel), AcceleratorCount: proto.Int32(count),
		}}
	}
	if len(c.cfg.NetworkTags) > 0 {
		in.Tags = &computepb.Tags{Items: c.cfg.NetworkTags}
	}
	if c.cfg.ServiceAccount != "" {
		in.ServiceAccounts = []*computepb.ServiceAccount{{Email: proto.String(c.cfg.ServiceAccount), Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}}}
	}
	return in
}

// opError is a zonal operation that finished DONE with errors in its body.
type opError struct {
	code string
	err  error
}

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// wait blocks until the operation is DONE through zoneOperations.wait
// (which itself returns after at most about two minutes, so it loops) and
// turns errors in a DONE operation's body into an *opError.
func (c *Compute) wait(ctx context.Context, zone string, op *computepb.Operation) error {
	for op.GetStatus() != computepb.Operation_DONE {
		next, err := c.ops.Wait(ctx, &computepb.WaitZoneOperationRequest{Project: c.cfg.Project, Zone: zone, Operation: op.GetName()}, c.callOpts...)
		if err != nil {
			return err
		}
		op = next
	}
	errs := op.GetError().GetErrors()
	if len(errs) == 0 {
		return nil
	}
	var msgs []string
	var sentinel error
	for _, e := range errs {
		msgs = append(msgs, e.GetCode()+": "+e.GetMessage())
		if s := mapOpCode(e.GetCode()); s != nil && sentinel == nil {
			sentinel = s
		}
	}
	if sentinel == nil {
		sentinel = errors.New("operation failed")
	}
	return &opError{code: errs[0].GetCode(), err: fmt.Errorf("%w: %s", sentinel, strings.Join(msgs, "; "))}
}

// mapOpCode maps an operation error code to a sentinel.
func mapOpCode(code string) error {
	switch code {
	case "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "RESOURCE_POOL_EXHAUSTED",
		"REGION_RESOURCE_POOL_EXHAUSTED", "STOCKOUT":
		return providers.ErrInsufficientCapacity
	case "QUOTA_EXCEEDED":
		return providers.ErrQuotaExceeded
	case "RATE_LIMIT_EXCEEDED":
		return providers.ErrThrottled
	case "PERMISSIONS_ERROR", "PERMISSION_DENIED", "FORBIDDEN":
		return providers.ErrUnauthorized
	case "RESOURCE_NOT_FOUND", "NOT_FOUND", "UNSUPPORTED_OPERATION", "RESOURCE_ALREADY_EXISTS", "CONDITION_NOT_MET":
		return providers.ErrBadConfig
	}
	if strings.HasPrefix(code, "INVALID") || strings.HasPrefix(code, "BAD_") {
		return providers.ErrBadConfig
	}
	return nil
}

// reasonOf is the reason of a Google API error: the first errors[].reason
// of the JSON body, else the ErrorInfo reason.
func reasonOf(err error) string {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		for _, e := range ge.Errors {
			if e.Reason != "" {
				return e.Reason
			}
		}
	}
	var ae *apierror.APIError
	if errors.As(err, &ae) {
		return ae.Reason()
	}
	return ""
}

// mapAPIErr maps a failed call by its reason, never its status alone: a
// 403 is a missing permission, an exhausted quota or a rate limit.
func mapAPIErr(err error) (string, error) {
	reason := reasonOf(err)
	var s error
	switch reason {
	case "quotaExceeded", "QUOTA_EXCEEDED":
		s = providers.ErrQuotaExceeded
	case "rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED":
		s = providers.ErrThrottled
	case "forbidden", "insufficientPermissions", "accessNotConfigured", "authError", "required", "IAM_PERMISSION_DENIED", "SERVICE_DISABLED":
		s = providers.ErrUnauthorized
	case "notFound":
		s = providers.ErrNotFound
	case "invalid", "badRequest", "invalidParameter", "conflict", "resourceInUseByAnotherResource":
		s = providers.ErrBadConfig
	case "resourceExhausted", "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS":
		s = providers.ErrInsufficientCapacity
	default:
		var ge *googleapi.Error
		if errors.As(err, &ge) && ge.Code == http.StatusUnauthorized {
			s = providers.ErrUnauthorized
		}
	}
	if s == nil {
		return reason, err
	}
	return reason, fmt.Errorf("%w: %w", s, err)
}

// Terminate deletes the instance (its boot disk is auto-deleted) and waits
// for the operation. An instance already gone is not an error.
func (c *Compute) Terminate(ctx context.Context, ref providers.InstanceRef) error {
	op, err := c.inst.Delete(ctx, &computepb.DeleteInstanceRequest{
		Project: c.cfg.Project, Zone: ref.Zone, Instance: ref.ID, RequestId: proto.String(RequestID("delete/" + ref.Zone + "/" + ref.ID)),
	}, c.callOpts...)
	if err != nil {
		_, s := mapAPIErr(err)
		if errors.Is(s, providers.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("gcp terminate %s in %s: %w", ref.ID, ref.Zone, s)
	}
	if err := c.wait(ctx, ref.Zone, op.Proto()); err != nil {
		var oe *opError
		if errors.As(err, &oe) && (oe.code == "RESOURCE_NOT_FOUND" || oe.code == "NOT_FOUND") {
			return nil
		}
		if !errors.As(err, &oe) {
			_, err = mapAPIErr(err)
		}
		return fmt.Errorf("gcp terminate %s in %s: %w", ref.ID, ref.Zone, err)
	}
	return nil
}

// List returns the instances whose labels match every tag of f (keys and
// values sanitised as Launch does) in f.Regions (configured regions when
// empty; every zone when neither), through one aggregatedList with every
// page. Unreachable zones fail the list: partial results would look like
// lost instances.
func (c *Compute) List(ctx context.Context, f providers.Filter) ([]providers.Instance, error) {
	regions := f.Regions
	if len(regions) == 0 {
		regions = c.cfg.Regions
	}
	want := map[string]bool{}
	for _, r := range regions {
		want[r] = true
	}
	var clauses []string
	keys := make([]string, 0, len(f.Tags))
	for k := range f.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		clauses = append(clauses, fmt.Sprintf(`(labels.%s = "%s")`, Label(k, true), Label(f.Tags[k], false)))
	}
	req := &computepb.AggregatedListInstancesRequest{Project: c.cfg.Project, MaxResults: proto.Uint32(500)}
	if len(clauses) > 0 {
		req.Filter = proto.String(strings.Join(clauses, " AND "))
	}
	it := c.inst.AggregatedList(ctx, req, c.callOpts...)
	var out []providers.Instance
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			_, s := mapAPIErr(err)
			return nil, fmt.Errorf("gcp list: instances.aggregatedList: %w", s)
		}
		for _, in := range pair.Value.GetInstances() {
			i, verbatim := instanceOf(in)
			if len(want) > 0 && !want[i.Region] {
				continue
			}
			// Sanitising can make two tags one label ("train/0" and
			// "train_0"): with the verbatim tags at hand, match exactly.
			if verbatim && !providers.HasTags(i.Tags, f.Tags) {
				continue
			}
			out = append(out, i)
		}
	}
	return out, nil
}

func lastPart(u string) string {
	return u[strings.LastIndex(u, "/")+1:]
}

// instanceOf converts an instance as the API returns it; verbatim says
// whether its tags came from the metadata copy rather than the labels.
func instanceOf(in *computepb.Instance) (providers.Instance, bool) {
	zone := lastPart(in.GetZone())
	region := zone
	if i := strings.LastIndex(zone, "-"); i > 0 {
		region = zone[:i]
	}
	typ := lastPart(in.GetMachineType())
	for _, a := range in.GetGuestAccelerators() {
		typ = fmt.Sprintf("%s+%sx%d", typ, lastPart(a.GetAcceleratorType()), a.GetAcceleratorCount())
	}
	out := providers.Instance{
		InstanceRef:  providers.InstanceRef{Cloud: pricing.GCP, Region: region, Zone: zone, ID: in.GetName()},
		InstanceType: typ,
		Capacity:     pricing.OnDemand,
		State:        providers.StateUnknown,
		Tags:         map[string]string{},
	}
	if m := in.GetScheduling().GetProvisioningModel(); m == "SPOT" || in.GetScheduling().GetPreemptible() {
		out.Capacity = pricing.Spot
	}
	switch in.GetStatus() {
	case "PROVISIONING", "STAGING":
		out.State = providers.StatePending
	case "RUNNING":
		out.State = providers.StateRunning
	case "STOPPING", "SUSPENDING":
		out.State = providers.StateStopping
	// GCP's TERMINATED is a stopped VM (a Spot VM with termination action
	// STOP ends there); deleted ones are simply not listed.
	case "TERMINATED", "SUSPENDED":
		out.State = providers.StateStopped
	}
	if t, err := time.Parse(time.RFC3339, in.GetCreationTimestamp()); err == nil {
		out.LaunchedAt = t
	}
	if nics := in.GetNetworkInterfaces(); len(nics) > 0 {
		out.PrivateIP = nics[0].GetNetworkIP()
	}
	restored := false
	for _, it := range in.GetMetadata().GetItems() {
		var tags map[string]string
		if it.GetKey() == TagsMetadataKey && json.Unmarshal([]byte(it.GetValue()), &tags) == nil && tags != nil {
			out.Tags, restored = tags, true
		}
	}
	if !restored {
		for k, v := range in.GetLabels() {
			out.Tags[k] = v
		}
	}
	return out, restored
}
