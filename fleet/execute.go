package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/store"
)

// execute carries out the pass's terminations and launches (in Apply mode,
// not paused); otherwise it reports them and records each once per term as
// a dry-run event.
func (p *passState) execute(ctx context.Context) error {
	stopped := map[pricing.Cloud]string{} // clouds not to call again this pass, and why
	for _, t := range p.terms {
		p.terminate(ctx, t)
	}
	if err := p.flush(ctx); err != nil {
		return err
	}
	for _, l := range p.launches {
		var err error
		if l.keep != nil {
			err = p.doLaunchFirst(ctx, l, stopped)
		} else {
			err = p.doLaunch(ctx, l, stopped)
		}
		if err != nil {
			return err
		}
	}
	return p.flush(ctx)
}

// terminate stops one instance (in Apply mode, not paused); a failure is
// retried at the next pass, the instance being retired.
func (p *passState) terminate(ctx context.Context, t terminatePlan) {
	a := p.act(Action{Kind: "terminate", Slot: t.rec.SlotID, Instance: t.rec.ID, Cloud: t.rec.Cloud, Zone: t.rec.Zone,
		InstanceType: t.rec.InstanceType, Capacity: t.rec.Capacity, Reason: t.reason})
	c := p.r.Computes[pricing.Cloud(t.rec.Cloud)]
	if !p.acts || c == nil {
		p.dryRun(a)
		return
	}
	err := c.Terminate(ctx, providers.InstanceRef{Cloud: pricing.Cloud(t.rec.Cloud), Region: t.rec.Region, Zone: t.rec.Zone, ID: t.rec.ID})
	if err != nil && !errors.Is(err, providers.ErrNotFound) {
		a.Error = err.Error()
		p.r.Log.Warn("terminate failed; retrying next pass", "instance", t.rec.ID, "err", err)
		return
	}
	a.Done = true
	if p.noEvents {
		return
	}
	p.event("fleet.terminate", t.rec.ID, "", fmt.Sprintf("terminated %s: %s", t.rec.ID, t.reason),
		map[string]any{"slot": t.rec.SlotID, "cloud": t.rec.Cloud, "zone": t.rec.Zone, "reason": t.reason})
}

// doLaunchFirst carries out a launch-first move (launchFirst): it records
// the launch intent under the slot's next generation and calls the cloud
// while the slot stays on its running instance; only when the launch
// succeeds does the slot take the new instance (draining → launching →
// booting, as a replacement) and the old one is retired and stopped. A
// refused launch blocks its pools as any launch does and leaves the slot
// as it was: the policy decides again at its next pass. Crash safety: the
// intent is durable before the call; should the pass stop between the
// launch and the slot's update, the new instance carries a generation the
// slot does not have, so it is an orphan and is stopped after the grace
// period, and the slot keeps its instance.
func (p *passState) doLaunchFirst(ctx context.Context, l *launchPlan, stopped map[pricing.Cloud]string) error {
	s, spec, old := l.slot, l.spec, l.keep
	o := &p.r.Options
	cloud := spec.Offer.Cloud
	a := p.act(Action{Kind: "launch", Slot: s.ID, Workload: s.Workload, Cloud: string(cloud), Zone: zoneOf(spec.Offer),
		InstanceType: spec.Offer.InstanceType, Capacity: string(spec.Capacity), Reason: "launch first: " + l.reason})
	if why, ok := stopped[cloud]; ok {
		a.Reason = "not this pass: " + why
		return nil
	}
	cands := p.candidates(spec)
	if len(cands) == 0 {
		a.Kind, a.Reason = "wait", "every candidate pool is unavailable; staying where it runs"
		return nil
	}
	a.Zone, a.InstanceType = zoneOf(cands[0]), cands[0].InstanceType
	if why := p.capHeld(cloud); why != "" {
		a.Reason = "held back: " + why
		return nil
	}
	intent, req, err := p.newIntent(ctx, s, spec, cands)
	if err != nil {
		return err
	}
	gen := intent.Generation
	// The intent is durable before the cloud hears of the launch.
	if err := p.flush(ctx); err != nil {
		return err
	}
	// The user data names the new pool; the slot's own fields change only
	// with a launch that succeeded.
	target := *s
	target.Cloud, target.Region, target.Zone, target.InstanceType = string(cands[0].Cloud), cands[0].Region, zoneOf(cands[0]), cands[0].InstanceType
	ud, err := p.userData(ctx, &target, spec, req)
	if err != nil {
		a.Error = err.Error()
		stopped[cloud] = "user data: " + err.Error()
		intent.State, intent.Error, intent.UpdatedAt = store.IntentFailed, err.Error(), p.now
		p.dirtyI[intent.Token] = true
		return p.flush(ctx)
	}
	req.UserData = ud
	lctx, cancel := context.WithTimeout(ctx, o.LaunchTimeout)
	inst, err := p.r.Computes[cloud].Launch(lctx, req)
	cancel()
	p.markLaunch(cloud)
	if err == nil {
		a.Done, a.Instance, a.Zone, a.InstanceType = true, inst.ID, inst.Zone, inst.InstanceType
		p.move(s, Draining, l.reason)
		p.applySpec(s, spec)
		s.Generation, s.InstanceID, s.LaunchedAt, s.RunningAt = gen, "", p.now, time.Time{}
		p.bySlot[s.ID] = intent
		p.move(s, Launching, "launch "+l.reason)
		p.launched(s, intent, inst)
		p.retire(old, l.reason)
		if err := p.flush(ctx); err != nil {
			return err
		}
		p.terminate(ctx, terminatePlan{rec: old, reason: l.reason})
		return p.flush(ctx)
	}
	reason := launchReason(err)
	a.Error = err.Error()
	p.launchFailed(s, intent, cloud, reason, err, "; the slot stays on "+old.ID)
	switch reason {
	case "capacity", "quota":
		for _, k := range refusedPools(reason, err, req) {
			p.r.Unavailable.Block(k, reason, p.now)
		}
	case "unauthorized", "bad_config", "throttled":
		stopped[cloud] = reason
	}
	// Refused, or the outcome unknown (a timeout, a lost answer): the slot
	// keeps its instance. An instance the call did make carries a
	// generation the slot does not have: an orphan, stopped after the
	// grace period.
	intent.State, intent.Error, intent.UpdatedAt = store.IntentFailed, err.Error(), p.now
	p.dirtyI[intent.Token] = true
	return p.flush(ctx)
}

// newIntent records the launch intent of a slot's next instance on cands
// (durable at the next flush, before the cloud hears of it) and returns it
// with the request. The next generation is past the slot's and past any
// launch the store recorded for the slot id (a slot id used before, or a
// refused launch-first move, doLaunchFirst, which leaves the slot at its
// generation), so (slot, generation) and the token are never used twice.
func (p *passState) newIntent(ctx context.Context, s *store.SlotRecord, spec *Spec, cands []pricing.Offer) (*store.IntentRecord, providers.LaunchRequest, error) {
	o := &p.r.Options
	last, err := p.r.Store.LastGeneration(ctx, s.ID)
	if err != nil {
		return nil, providers.LaunchRequest{}, fmt.Errorf("launch of %s: %w", s.ID, err)
	}
	gen := max(s.Generation, last) + 1
	token := p.r.tokens.token(o.Name, s.ID, gen)
	req := providers.LaunchRequest{ClientToken: token, Name: instanceName(s.ID, gen), Candidates: cands, Capacity: spec.Capacity,
		Tags: map[string]string{TagFleet: o.Name, TagSlot: s.ID, TagToken: token, TagWorkload: s.Workload}}
	body, _ := json.Marshal(req)
	intent := &store.IntentRecord{Token: token, SlotID: s.ID, Generation: gen, Epoch: p.fence.Epoch, Cloud: string(spec.Offer.Cloud),
		Capacity: string(spec.Capacity), Request: body, State: store.IntentOpen, CreatedAt: p.now, UpdatedAt: p.now}
	p.intents[token] = intent
	p.dirtyI[token] = true
	return intent, req, nil
}

// launchFailed counts a launch the cloud refused or that failed and
// records it as a fleet.launch_failed event; more ends the message.
func (p *passState) launchFailed(s *store.SlotRecord, intent *store.IntentRecord, cloud pricing.Cloud, reason string, err error, more string) {
	if p.r.Metrics != nil {
		p.r.Metrics.launchFailures.WithLabelValues(string(cloud), reason).Inc()
	}
	p.event("fleet.launch_failed", "", s.Workload, fmt.Sprintf("slot %s: launch in %s failed (%s): %v%s", s.ID, cloud, reason, err, more),
		map[string]any{"slot": s.ID, "token": intent.Token, "reason": reason, "cloud": cloud})
}

// refusedPools are the pools a capacity or quota refusal blocks: the one
// the error names, or every candidate when all were tried in one call
// (EC2 CreateFleet style, reason capacity) or the error names none.
func refusedPools(reason string, err error, req providers.LaunchRequest) []providers.PoolKey {
	var le *providers.LaunchError
	if reason != "capacity" && errors.As(err, &le) && le.Pool.InstanceType != "" {
		return []providers.PoolKey{le.Pool}
	}
	pools := make([]providers.PoolKey, 0, len(req.Candidates))
	for _, c := range req.Candidates {
		pools = append(pools, PoolOf(c, req.Capacity))
	}
	return pools
}

// describe lists the pass's terminations and launches without carrying
// them out (Diff).
func (p *passState) describe() {
	for _, t := range p.terms {
		p.act(Action{Kind: "terminate", Slot: t.rec.SlotID, Instance: t.rec.ID, Cloud: t.rec.Cloud, Zone: t.rec.Zone,
			InstanceType: t.rec.InstanceType, Capacity: t.rec.Capacity, Reason: t.reason})
	}
	for _, l := range p.launches {
		a := Action{Kind: "launch", Slot: l.slot.ID, Workload: l.slot.Workload, Cloud: string(l.spec.Offer.Cloud),
			Zone: zoneOf(l.spec.Offer), InstanceType: l.spec.Offer.InstanceType, Capacity: string(l.spec.Capacity), Reason: l.reason}
		if l.intent != nil {
			a.Kind, a.Reason = "retry", "open launch intent "+l.intent.Token+", same client token"
		} else if cands := p.candidates(l.spec); len(cands) == 0 {
			a.Kind, a.Reason = "wait", "every candidate pool is unavailable; waiting for the re-plan"
		} else if why := p.capHeld(l.spec.Offer.Cloud); why != "" {
			a.Reason = strings.TrimSpace(a.Reason + " held back: " + why)
		}
		p.act(a)
	}
}

// dryRun records an action that was not carried out, once per term.
func (p *passState) dryRun(a *Action) {
	why := "dry-run"
	if p.rep.Paused {
		why = "paused"
	}
	if a.Reason == "" {
		a.Reason = why
	} else {
		a.Reason += " (" + why + ")"
	}
	key := a.Kind + "|" + a.Slot + "|" + a.Instance + "|" + a.Zone + "|" + a.InstanceType
	p.r.mu.Lock()
	seen := p.r.seen[key]
	p.r.seen[key] = true
	p.r.mu.Unlock()
	if seen {
		return
	}
	msg := fmt.Sprintf("would %s %s", a.Kind, strings.TrimSpace(a.Slot+" "+a.Instance))
	if a.Zone != "" {
		msg += fmt.Sprintf(" in %s/%s %s %s", a.Cloud, a.Zone, a.InstanceType, a.Capacity)
	}
	p.event("fleet.dry_run", a.Instance, "", msg+": "+a.Reason, a)
	p.r.Log.Info("fleet "+why+": action not taken", "action", a.Kind, "slot", a.Slot, "instance", a.Instance, "where", a.Cloud+"/"+a.Zone, "reason", a.Reason)
}

// replan asks the plan source again with the current blocked pools and
// takes the new specs; false when the plan did not change.
func (p *passState) replan(ctx context.Context) bool {
	v := p.r.Unavailable.Version()
	if v == p.planVersion {
		return false
	}
	p.planVersion = v
	plan, err := p.r.Plans.Plan(InPass(ctx), p.r.Unavailable)
	if err != nil {
		p.rep.Errors = append(p.rep.Errors, "re-plan after blocking pools: "+err.Error())
		return false
	}
	specs := p.desired(plan)
	for i := range specs {
		if s := &specs[i]; p.specs[s.ID] != nil {
			p.specs[s.ID] = s
		}
	}
	return true
}

// candidates are the spec's offers whose pools are not blocked, best first.
func (p *passState) candidates(spec *Spec) []pricing.Offer {
	var out []pricing.Offer
	for _, o := range append([]pricing.Offer{spec.Offer}, spec.Alternatives...) {
		if !p.r.Unavailable.Blocked(PoolOf(o, spec.Capacity), p.now) {
			out = append(out, o)
		}
	}
	return out
}

// capHeld says which cap, if any, holds a launch in cloud back.
func (p *passState) capHeld(cloud pricing.Cloud) string {
	o := &p.r.Options
	total := 0
	for _, n := range p.alive {
		total += n
	}
	if total >= o.MaxInstances {
		return fmt.Sprintf("fleet instance cap %d reached", o.MaxInstances)
	}
	if m := o.MaxPerCloud[cloud]; m > 0 && p.alive[cloud] >= m {
		return fmt.Sprintf("%s instance cap %d reached", cloud, m)
	}
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	var all, mine int
	if p.r.inOrder && o.LaunchesPerMinutePerCloud <= 0 {
		// In time order (the clock did not step back): the launches of
		// the last minute are a suffix, and only their number counts. (A
		// pass of a hundred launches scanned the minute's for each.)
		i := 0
		for i < len(p.r.launches) && p.now.Sub(p.r.launches[i].at) >= 60e9 {
			i++
		}
		if i > 0 {
			p.r.launches = append(p.r.launches[:0], p.r.launches[i:]...)
		}
		all = len(p.r.launches)
	} else {
		kept := p.r.launches[:0]
		for _, l := range p.r.launches {
			if p.now.Sub(l.at) < 60e9 {
				kept = append(kept, l)
				all++
				if l.cloud == cloud {
					mine++
				}
			}
		}
		p.r.launches = kept
		p.r.inOrder = true // (what is kept is in order unless the clock stepped back)
		for i := 1; i < len(kept); i++ {
			if kept[i].at.Before(kept[i-1].at) {
				p.r.inOrder = false
				break
			}
		}
	}
	if all >= o.LaunchesPerMinute {
		return fmt.Sprintf("launch rate cap %d/min reached", o.LaunchesPerMinute)
	}
	if o.LaunchesPerMinutePerCloud > 0 && mine >= o.LaunchesPerMinutePerCloud {
		return fmt.Sprintf("%s launch rate cap %d/min reached", cloud, o.LaunchesPerMinutePerCloud)
	}
	return ""
}

func (p *passState) markLaunch(cloud pricing.Cloud) {
	p.r.mu.Lock()
	if n := len(p.r.launches); n == 0 {
		p.r.inOrder = true
	} else if p.now.Before(p.r.launches[n-1].at) {
		p.r.inOrder = false
	}
	p.r.launches = append(p.r.launches, launchMark{at: p.now, cloud: cloud})
	p.r.mu.Unlock()
	p.alive[cloud]++
}

// instanceName is a readable, cloud-valid name: lower-case letters, digits
// and dashes, at most 63 characters, unique per slot generation.
func instanceName(slot string, gen int) string {
	var b strings.Builder
	b.WriteString("gpb-")
	for _, r := range strings.ToLower(slot) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	suffix := "-g" + strconv.Itoa(gen)
	s := b.String()
	if len(s)+len(suffix) > 63 {
		s = s[:63-len(suffix)]
	}
	return s + suffix
}

// launchReason labels a launch error for metrics and events.
func launchReason(err error) string {
	switch {
	case errors.Is(err, providers.ErrInsufficientCapacity):
		return "capacity"
	case errors.Is(err, providers.ErrQuotaExceeded):
		return "quota"
	case errors.Is(err, providers.ErrThrottled):
		return "throttled"
	case errors.Is(err, providers.ErrUnauthorized):
		return "unauthorized"
	case errors.Is(err, providers.ErrBadConfig):
		return "bad_config"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "unknown"
}

// doLaunch launches (or finishes) one slot's instance, falling back to the
// next pools after capacity or quota errors, up to MaxAttempts.
func (p *passState) doLaunch(ctx context.Context, l *launchPlan, stopped map[pricing.Cloud]string) error {
	s, spec := l.slot, l.spec
	o := &p.r.Options
	for attempt := 0; attempt < o.MaxAttempts; attempt++ {
		cloud := spec.Offer.Cloud
		intent := l.intent
		var req providers.LaunchRequest
		if intent != nil {
			cloud = pricing.Cloud(intent.Cloud)
			if err := json.Unmarshal(intent.Request, &req); err != nil {
				// Unreadable (an older format): give the launch up; a new
				// generation follows.
				intent.State, intent.Error, intent.UpdatedAt = store.IntentFailed, "unreadable launch request: "+err.Error(), p.now
				p.dirtyI[intent.Token] = true
				p.move(s, Pending, "launch record unreadable")
				l.intent = nil
				continue
			}
		}
		a := p.act(Action{Kind: "launch", Slot: s.ID, Workload: s.Workload, Cloud: string(cloud), Zone: zoneOf(spec.Offer),
			InstanceType: spec.Offer.InstanceType, Capacity: string(spec.Capacity), Reason: l.reason})
		if intent != nil {
			a.Kind = "retry"
			if len(req.Candidates) > 0 {
				a.Zone, a.InstanceType = zoneOf(req.Candidates[0]), req.Candidates[0].InstanceType
			}
		}
		if why, ok := stopped[cloud]; ok {
			a.Reason = "not this pass: " + why
			return nil
		}
		if intent == nil {
			cands := p.candidates(spec)
			if len(cands) == 0 {
				// The blocked pools changed: the optimizer moves the slot to
				// the next best pool now, not at the next scheduled re-plan.
				p.replan(ctx)
				if ns := p.specs[s.ID]; ns != nil && ns != spec {
					spec, l.spec = ns, ns
					p.applySpec(s, spec)
					a.Zone, a.InstanceType, a.Cloud = zoneOf(spec.Offer), spec.Offer.InstanceType, string(spec.Offer.Cloud)
					cloud = spec.Offer.Cloud
					cands = p.candidates(spec)
				}
			}
			if len(cands) == 0 {
				a.Kind, a.Reason = "wait", "every candidate pool is unavailable; waiting for the re-plan"
				if State(s.State) != Pending {
					p.move(s, Pending, a.Reason)
				}
				return nil
			}
			a.Zone, a.InstanceType = zoneOf(cands[0]), cands[0].InstanceType
			if why := p.capHeld(cloud); why != "" {
				a.Reason = "held back: " + why
				p.move(s, State(s.State), a.Reason)
				return nil
			}
			if !p.acts {
				p.dryRun(a)
				return nil
			}
			var err error
			if intent, req, err = p.newIntent(ctx, s, spec, cands); err != nil {
				return err
			}
			p.bySlot[s.ID] = intent
			s.Generation, s.InstanceID, s.LaunchedAt, s.RunningAt = intent.Generation, "", p.now, time.Time{}
			if State(s.State) == Gone {
				p.move(s, Pending, "back in the plan")
			}
			p.move(s, Launching, strings.TrimSpace("launch "+l.reason))
			// The intent is durable before the cloud hears of the launch.
			if err := p.flush(ctx); err != nil {
				return err
			}
		} else {
			if !p.acts {
				p.dryRun(a)
				return nil
			}
			if why := p.capHeld(cloud); why != "" && !strings.Contains(why, "instance cap") {
				// A retry may exceed the instance cap (its instance may
				// already exist) but not the launch rate.
				a.Reason = "held back: " + why
				return nil
			}
		}
		compute := p.r.Computes[cloud]
		ud, err := p.userData(ctx, s, spec, req)
		if err != nil {
			a.Error = err.Error()
			stopped[cloud] = "user data: " + err.Error()
			return nil
		}
		req.UserData = ud
		lctx, cancel := context.WithTimeout(ctx, o.LaunchTimeout)
		inst, err := compute.Launch(lctx, req)
		cancel()
		p.markLaunch(cloud)
		if err == nil {
			a.Done, a.Instance, a.Zone, a.InstanceType = true, inst.ID, inst.Zone, inst.InstanceType
			p.launched(s, intent, inst)
			return p.flush(ctx)
		}
		reason := launchReason(err)
		a.Error = err.Error()
		p.launchFailed(s, intent, cloud, reason, err, "")
		switch reason {
		case "capacity", "quota":
			for _, k := range refusedPools(reason, err, req) {
				p.r.Unavailable.Block(k, reason, p.now)
				if up := p.gangUp(s, k); reason == "capacity" && up > 0 {
					// The pool refused a job's next instance beside the ones
					// it runs: it holds that many, not the whole job.
					p.r.Unavailable.Limit(k, up, p.now)
				}
			}
			intent.State, intent.Error, intent.UpdatedAt = store.IntentFailed, err.Error(), p.now
			p.dirtyI[intent.Token] = true
			p.move(s, Pending, fmt.Sprintf("%s error in %s; trying the next pool", reason, cloud))
			l.intent = nil
			if err := p.flush(ctx); err != nil {
				return err
			}
			continue
		case "unauthorized", "bad_config":
			intent.State, intent.Error, intent.UpdatedAt = store.IntentFailed, err.Error(), p.now
			p.dirtyI[intent.Token] = true
			p.move(s, Pending, reason+": "+err.Error())
			stopped[cloud] = reason
		default:
			// Throttled, timed out, lost: the outcome is unknown or the cloud
			// asked us to wait. The intent stays open and the next pass
			// retries it with the same token (or adopts its instance).
			intent.Error, intent.UpdatedAt = err.Error(), p.now
			p.dirtyI[intent.Token] = true
			if reason == "throttled" {
				stopped[cloud] = "throttled"
			}
		}
		return p.flush(ctx)
	}
	return nil
}

// launched records a successful launch.
func (p *passState) launched(s *store.SlotRecord, intent *store.IntentRecord, inst providers.Instance) {
	intent.State, intent.InstanceID, intent.Region, intent.Zone, intent.Error, intent.UpdatedAt = store.IntentLaunched, inst.ID, inst.Region, inst.Zone, "", p.now
	p.dirtyI[intent.Token] = true
	s.InstanceID = inst.ID
	s.Cloud, s.Region, s.Zone, s.InstanceType, s.Capacity = string(inst.Cloud), inst.Region, inst.Zone, inst.InstanceType, string(inst.Capacity)
	if !inst.LaunchedAt.IsZero() {
		s.LaunchedAt = inst.LaunchedAt.UTC()
	}
	p.move(s, Booting, "launched "+inst.ID)
	rec := p.records[inst.ID]
	if rec == nil {
		rec = &store.FleetInstanceRecord{ID: inst.ID, FirstSeen: p.now}
		p.records[inst.ID] = rec
	}
	rec.Cloud, rec.Region, rec.Zone, rec.InstanceType, rec.Capacity = string(inst.Cloud), inst.Region, inst.Zone, inst.InstanceType, string(inst.Capacity)
	rec.State, rec.SlotID, rec.Token, rec.LaunchedAt = string(inst.State), s.ID, intent.Token, inst.LaunchedAt.UTC()
	p.dirtyN[inst.ID] = true
	p.r.Unavailable.Clear(providers.PoolKey{Cloud: inst.Cloud, Zone: inst.Zone, InstanceType: inst.InstanceType, Capacity: inst.Capacity}, p.now)
	if p.r.Metrics != nil {
		p.r.Metrics.launches.WithLabelValues(string(inst.Cloud), string(inst.Capacity)).Inc()
	}
}

// userData renders the boot script of a launch with a registration token
// minted for it (the same token on a retry of the same launch).
func (p *passState) userData(ctx context.Context, s *store.SlotRecord, spec *Spec, req providers.LaunchRequest) (string, error) {
	o := &p.r.Options
	tmpl := o.UserData[pricing.Cloud(s.Cloud)]
	if tmpl == nil {
		tmpl = DefaultUserData
	}
	in := UserDataInput{BrokerURL: o.BrokerURL, Fleet: o.Name, Slot: s.ID, Workload: s.Workload, Cloud: s.Cloud,
		Capacity: string(req.Capacity), Command: o.Commands[s.Workload]}
	if len(req.Candidates) > 0 {
		c := req.Candidates[0]
		in.Region, in.Zone, in.InstanceType = c.Region, zoneOf(c), c.InstanceType
	}
	if p.r.Tokens != nil {
		tok, err := p.r.Tokens.Mint(ctx, MintRequest{ClientToken: req.ClientToken, Slot: s.ID, Workload: s.Workload,
			Expires: p.now.Add(o.BootTimeout)})
		if err != nil {
			return "", fmt.Errorf("minting the registration token: %w", err)
		}
		in.Token = tok
	}
	_ = spec
	return RenderUserData(tmpl, in)
}
