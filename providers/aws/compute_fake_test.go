package aws

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeEC2 is a stateful stand-in for the EC2 compute calls (query protocol,
// XML in the 2016-11-15 namespace): CreateLaunchTemplate, CreateFleet of
// type instant, DescribeInstances and TerminateInstances. Like EC2 it is
// idempotent on ClientToken: a repeated token returns the first answer and
// starts nothing. Knobs: poolErr makes a pool fail with an EC2 error code
// inside the CreateFleet response; faults script whole answers per action
// (served before the real handling); drop makes an action do its work and
// then cut the connection, as when a response is lost.
type fakeEC2 struct {
	t   testing.TB
	srv *httptest.Server

	mu        sync.Mutex
	seq       int
	instances []*fakeInstance
	fleets    map[string]string // ClientToken → response body
	templates map[string]string // name → ClientToken
	poolErr   map[string]string // "zone/type/lifecycle" → error code
	faults    map[string][]fault
	drop      map[string]int
	calls     map[string]int
	forms     map[string][]url.Values
}

type fakeInstance struct {
	id, region, zone, typ, lifecycle, state, subnet, ip string
	tags                                                map[string]string
	volumeTags                                          map[string]string
	userData                                            string
	launched                                            time.Time
}

func newFakeEC2(t testing.TB) *fakeEC2 {
	f := &fakeEC2{t: t, fleets: map[string]string{}, templates: map[string]string{}, poolErr: map[string]string{},
		faults: map[string][]fault{}, drop: map[string]int{}, calls: map[string]int{}, forms: map[string][]url.Values{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEC2) count(action string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[action]
}

func (f *fakeEC2) lastForm(action string) url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs := f.forms[action]
	if len(fs) == 0 {
		f.t.Fatalf("no %s call", action)
	}
	return fs[len(fs)-1]
}

func (f *fakeEC2) fail(action string, fs ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[action] = append(f.faults[action], fs...)
}

// add puts an instance in the fake as if launched earlier.
func (f *fakeEC2) add(region, zone, typ, lifecycle, state string, tags map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newInstance(region, zone, typ, lifecycle, state, "", tags)
}

func (f *fakeEC2) newInstance(region, zone, typ, lifecycle, state, subnet string, tags map[string]string) string {
	f.seq++
	in := &fakeInstance{id: fmt.Sprintf("i-%017x", 0xa000+f.seq), region: region, zone: zone, typ: typ, lifecycle: lifecycle,
		state: state, subnet: subnet, ip: fmt.Sprintf("10.0.%d.%d", f.seq/250, f.seq%250+4), tags: tags,
		launched: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).Add(time.Duration(f.seq) * time.Second)}
	f.instances = append(f.instances, in)
	return in.id
}

func (f *fakeEC2) live() []*fakeInstance {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fakeInstance
	for _, in := range f.instances {
		if in.state != "terminated" {
			out = append(out, in)
		}
	}
	return out
}

func (f *fakeEC2) serve(w http.ResponseWriter, r *http.Request) {
	m := credentialScope.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil || m[2] != "ec2" {
		ec2Error(w, http.StatusUnauthorized, "AuthFailure", "AWS was not able to validate the provided access credentials")
		return
	}
	region := m[1]
	if err := r.ParseForm(); err != nil {
		ec2Error(w, http.StatusBadRequest, "InvalidParameterValue", err.Error())
		return
	}
	form := r.PostForm
	action := form.Get("Action")
	if form.Get("Version") != "2016-11-15" {
		ec2Error(w, http.StatusBadRequest, "InvalidParameterValue", "unknown Version")
		return
	}
	f.mu.Lock()
	f.calls[action]++
	f.forms[action] = append(f.forms[action], form)
	var ft *fault
	if q := f.faults[action]; len(q) > 0 {
		x := q[0]
		if x.times < 0 {
			ft = &x
		} else {
			if x.times > 1 {
				q[0].times--
			} else {
				f.faults[action] = q[1:]
			}
			if x.status != passThrough.status {
				ft = &x
			}
		}
	}
	dropIt := f.drop[action] > 0
	if dropIt {
		f.drop[action]--
	}
	f.mu.Unlock()
	if ft != nil {
		if ft.delay > 0 {
			select {
			case <-time.After(ft.delay):
			case <-r.Context().Done():
				return
			}
		}
		if ft.status > 0 {
			w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
			w.WriteHeader(ft.status)
			fmt.Fprint(w, ft.body)
			return
		}
	}
	var status int
	var body string
	f.mu.Lock()
	switch action {
	case "CreateLaunchTemplate":
		status, body = f.createLaunchTemplate(form)
	case "CreateFleet":
		status, body = f.createFleet(region, form)
	case "DescribeInstances":
		status, body = f.describeInstances(region, form)
	case "TerminateInstances":
		status, body = f.terminateInstances(region, form)
	case "DescribeSubnets":
		status, body = f.describeSubnets(form)
	default:
		status, body = http.StatusBadRequest, errBody("InvalidAction", "The action "+action+" is not valid for this web service.")
	}
	f.mu.Unlock()
	if dropIt {
		// The work is done; the answer never arrives.
		hj, ok := w.(http.Hijacker)
		if !ok {
			f.t.Fatal("response writer cannot hijack")
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func errBody(code, msg string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(msg))
	return `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>` + code + `</Code><Message>` + b.String() + `</Message></Error></Errors><RequestID>7b1e3a52-5c4d-4f0e-9a8b-2d6c1e0f9a37</RequestID></Response>`
}

const ec2NS = `xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"`

func (f *fakeEC2) createLaunchTemplate(form url.Values) (int, string) {
	name, token := form.Get("LaunchTemplateName"), form.Get("ClientToken")
	if name == "" || form.Get("LaunchTemplateData.ImageId") == "" {
		return 400, errBody("MissingParameter", "The request must contain the parameter LaunchTemplateName and LaunchTemplateData.ImageId")
	}
	if prev, ok := f.templates[name]; ok && prev != token {
		return 400, errBody("InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
	}
	f.templates[name] = token
	return 200, fmt.Sprintf(`<CreateLaunchTemplateResponse %s><requestId>39f5a1c2-d6a2-4b65-9a1b-3c7e0ad5f1e2</requestId><launchTemplate><createTime>2026-12-02T10:00:00.000Z</createTime><createdBy>arn:aws:iam::123456789012:root</createdBy><defaultVersionNumber>1</defaultVersionNumber><latestVersionNumber>1</latestVersionNumber><launchTemplateId>lt-0abcd1234ef567890</launchTemplateId><launchTemplateName>%s</launchTemplateName></launchTemplate></CreateLaunchTemplateResponse>`, ec2NS, name)
}

// indexed collects "prefix.N.rest" keys into N → rest → value.
func indexed(form url.Values, prefix string) []map[string]string {
	byN := map[int]map[string]string{}
	for k, vs := range form {
		if !strings.HasPrefix(k, prefix+".") {
			continue
		}
		rest := k[len(prefix)+1:]
		n, tail, _ := strings.Cut(rest, ".")
		i, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if byN[i] == nil {
			byN[i] = map[string]string{}
		}
		byN[i][tail] = vs[0]
	}
	keys := make([]int, 0, len(byN))
	for k := range byN {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([]map[string]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, byN[k])
	}
	return out
}

func (f *fakeEC2) createFleet(region string, form url.Values) (int, string) {
	token := form.Get("ClientToken")
	if prev, ok := f.fleets[token]; ok && token != "" {
		return 200, prev
	}
	if form.Get("Type") != "instant" {
		return 400, errBody("InvalidParameterValue", "this fake only serves instant fleets")
	}
	lt := "LaunchTemplateConfigs.1.LaunchTemplateSpecification."
	ltName := form.Get(lt + "LaunchTemplateName")
	if _, ok := f.templates[ltName]; !ok && form.Get(lt+"LaunchTemplateId") == "" {
		return 400, errBody("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name "+ltName+", does not exist.")
	}
	ud, err := base64.StdEncoding.DecodeString(form.Get(lt + "LaunchTemplateSpecificationUserData"))
	if err != nil {
		return 400, errBody("InvalidUserData.Malformed", "Invalid BASE64 encoding of user data.")
	}
	lifecycle := "on-demand"
	if form.Get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot" {
		lifecycle = "spot"
	}
	tags := map[string]map[string]string{}
	for _, ts := range indexed(form, "TagSpecification") {
		m := map[string]string{}
		for i := 1; ts[fmt.Sprintf("Tag.%d.Key", i)] != ""; i++ {
			m[ts[fmt.Sprintf("Tag.%d.Key", i)]] = ts[fmt.Sprintf("Tag.%d.Value", i)]
		}
		tags[ts["ResourceType"]] = m
	}
	ovs := indexed(form, "LaunchTemplateConfigs.1.Overrides")
	sort.SliceStable(ovs, func(i, j int) bool {
		pi, _ := strconv.ParseFloat(ovs[i]["Priority"], 64)
		pj, _ := strconv.ParseFloat(ovs[j]["Priority"], 64)
		return pi < pj
	})
	var errItems, instItems strings.Builder
	for _, ov := range ovs {
		zone := subnetZone(ov["SubnetId"])
		ltXML := fmt.Sprintf(`<launchTemplateAndOverrides><launchTemplateSpecification><launchTemplateName>%s</launchTemplateName><version>1</version></launchTemplateSpecification><overrides><instanceType>%s</instanceType><subnetId>%s</subnetId><priority>%s</priority></overrides></launchTemplateAndOverrides>`,
			ltName, ov["InstanceType"], ov["SubnetId"], ov["Priority"])
		if code := f.poolErr[zone+"/"+ov["InstanceType"]+"/"+lifecycle]; code != "" {
			fmt.Fprintf(&errItems, `<item>%s<lifecycle>%s</lifecycle><errorCode>%s</errorCode><errorMessage>%s</errorMessage></item>`,
				ltXML, lifecycle, code, poolMessage(code, ov["InstanceType"], zone))
			continue
		}
		id := f.newInstance(region, zone, ov["InstanceType"], lifecycle, "pending", ov["SubnetId"], tags["instance"])
		f.instances[len(f.instances)-1].volumeTags = tags["volume"]
		f.instances[len(f.instances)-1].userData = string(ud)
		fmt.Fprintf(&instItems, `<item>%s<lifecycle>%s</lifecycle><instanceIds><item>%s</item></instanceIds><instanceType>%s</instanceType><platform>linux</platform></item>`,
			ltXML, lifecycle, id, ov["InstanceType"])
		break
	}
	body := fmt.Sprintf(`<CreateFleetResponse %s><requestId>b3a1f0d2-7e4c-4a8b-9c1d-5e6f7a8b9c0d</requestId><fleetId>fleet-%08x-1234-4abc-8def-0123456789ab</fleetId><errorSet>%s</errorSet><fleetInstanceSet>%s</fleetInstanceSet></CreateFleetResponse>`,
		ec2NS, len(f.fleets)+1, errItems.String(), instItems.String())
	if token != "" {
		f.fleets[token] = body
	}
	return 200, body
}

// subnetZone is the test convention: subnet-0<zone letter>… lives in
// us-east-1<letter> (or us-west-2<letter> for subnet-1…).
func subnetZone(subnet string) string {
	if len(subnet) < len("subnet-00") {
		return ""
	}
	region := "us-east-1"
	if subnet[7] == '1' {
		region = "us-west-2"
	}
	return region + string(subnet[8])
}

// poolMessage is EC2's wording for each per-pool error code.
func poolMessage(code, typ, zone string) string {
	switch code {
	case "InsufficientInstanceCapacity":
		return fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. You can currently get %s capacity by not specifying an Availability Zone in your request or choosing us-east-1c.", typ, zone, typ)
	case "MaxSpotInstanceCountExceeded":
		return "Max spot instance count exceeded"
	case "VcpuLimitExceeded":
		return "You have requested more vCPU capacity than your current vCPU limit of 64 allows for the instance bucket that the specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit."
	case "InvalidAMIID.NotFound":
		return "The image id '[ami-0123456789abcdef0]' does not exist"
	}
	return code
}

var stateCode = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

func (f *fakeEC2) describeInstances(region string, form url.Values) (int, string) {
	filters := indexed(form, "Filter")
	max, _ := strconv.Atoi(form.Get("MaxResults"))
	if max == 0 {
		max = 1000
	}
	if max < 5 || max > 1000 {
		return 400, errBody("InvalidParameterValue", "Value ( "+form.Get("MaxResults")+" ) for parameter maxResults is invalid. Expecting a value between 5 and 1000.")
	}
	start := 0
	if tok := form.Get("NextToken"); tok != "" {
		var err error
		if start, err = strconv.Atoi(strings.TrimPrefix(tok, "tok-")); err != nil {
			return 400, errBody("InvalidParameterValue", "Unable to parse pagination token")
		}
	}
	var match []*fakeInstance
	for _, in := range f.instances {
		if in.region != region {
			continue
		}
		ok := true
		for _, fl := range filters {
			k, isTag := strings.CutPrefix(fl["Name"], "tag:")
			if !isTag {
				return 400, errBody("InvalidParameterValue", "The filter '"+fl["Name"]+"' is invalid")
			}
			if in.tags[k] != fl["Value.1"] {
				ok = false
			}
		}
		if ok {
			match = append(match, in)
		}
	}
	end := min(start+max, len(match))
	var b strings.Builder
	fmt.Fprintf(&b, `<DescribeInstancesResponse %s><requestId>8f7e6d5c-4b3a-4291-8f0e-1d2c3b4a5f6e</requestId><reservationSet>`, ec2NS)
	for i, in := range match[start:end] {
		fmt.Fprintf(&b, `<item><reservationId>r-%017x</reservationId><ownerId>123456789012</ownerId><groupSet/><instancesSet><item><instanceId>%s</instanceId><imageId>ami-0123456789abcdef0</imageId><instanceState><code>%d</code><name>%s</name></instanceState><privateDnsName>ip-10-0-0-1.ec2.internal</privateDnsName><amiLaunchIndex>0</amiLaunchIndex><instanceType>%s</instanceType><launchTime>%s</launchTime><placement><availabilityZone>%s</availabilityZone><groupName/><tenancy>default</tenancy></placement><monitoring><state>disabled</state></monitoring><subnetId>%s</subnetId><privateIpAddress>%s</privateIpAddress>`,
			start+i, in.id, stateCode[in.state], in.state, in.typ, in.launched.Format("2006-01-02T15:04:05.000Z"), in.zone, in.subnet, in.ip)
		if in.lifecycle == "spot" {
			b.WriteString(`<instanceLifecycle>spot</instanceLifecycle>`)
		}
		b.WriteString(`<tagSet>`)
		for k, v := range in.tags {
			fmt.Fprintf(&b, `<item><key>%s</key><value>%s</value></item>`, k, v)
		}
		b.WriteString(`</tagSet></item></instancesSet></item>`)
	}
	b.WriteString(`</reservationSet>`)
	if end < len(match) {
		fmt.Fprintf(&b, `<nextToken>tok-%d</nextToken>`, end)
	}
	b.WriteString(`</DescribeInstancesResponse>`)
	return 200, b.String()
}

func (f *fakeEC2) terminateInstances(region string, form url.Values) (int, string) {
	var b strings.Builder
	fmt.Fprintf(&b, `<TerminateInstancesResponse %s><requestId>c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f</requestId><instancesSet>`, ec2NS)
	for i := 1; form.Get(fmt.Sprintf("InstanceId.%d", i)) != ""; i++ {
		id := form.Get(fmt.Sprintf("InstanceId.%d", i))
		var found *fakeInstance
		for _, in := range f.instances {
			if in.id == id && in.region == region {
				found = in
			}
		}
		if found == nil {
			return 400, errBody("InvalidInstanceID.NotFound", "The instance ID '"+id+"' does not exist")
		}
		prev := found.state
		found.state = "terminated"
		fmt.Fprintf(&b, `<item><instanceId>%s</instanceId><currentState><code>32</code><name>shutting-down</name></currentState><previousState><code>%d</code><name>%s</name></previousState></item>`, id, stateCode[prev], prev)
	}
	b.WriteString(`</instancesSet></TerminateInstancesResponse>`)
	return 200, b.String()
}

// describeSubnets answers by the subnetZone convention; an id holding
// "dead" does not exist.
func (f *fakeEC2) describeSubnets(form url.Values) (int, string) {
	var b strings.Builder
	fmt.Fprintf(&b, `<DescribeSubnetsResponse %s><requestId>a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d</requestId><subnetSet>`, ec2NS)
	for i := 1; form.Get(fmt.Sprintf("SubnetId.%d", i)) != ""; i++ {
		id := form.Get(fmt.Sprintf("SubnetId.%d", i))
		if strings.Contains(id, "dead") {
			return 400, errBody("InvalidSubnetID.NotFound", "The subnet ID '"+id+"' does not exist")
		}
		fmt.Fprintf(&b, `<item><subnetId>%s</subnetId><subnetArn>arn:aws:ec2:us-east-1:123456789012:subnet/%s</subnetArn><state>available</state><ownerId>123456789012</ownerId><vpcId>vpc-0123456789abcdef0</vpcId><cidrBlock>10.0.%d.0/24</cidrBlock><availableIpAddressCount>250</availableIpAddressCount><availabilityZone>%s</availabilityZone><availabilityZoneId>use1-az%d</availabilityZoneId><defaultForAz>false</defaultForAz><mapPublicIpOnLaunch>false</mapPublicIpOnLaunch></item>`,
			id, id, i, subnetZone(id), i)
	}
	b.WriteString(`</subnetSet></DescribeSubnetsResponse>`)
	return 200, b.String()
}
