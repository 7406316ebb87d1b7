package rls

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/shardcounter/shardcounter"
)

// Service is Envoy's RateLimitService over a LimitService (the engine):
// ShouldRateLimit takes each descriptor's hits from the key of the rule it
// matches, under the configuration last given to SetConfig.
type Service struct {
	pb.UnimplementedRateLimitServiceServer
	limits shardcounter.LimitService
	cfg    atomic.Pointer[Config]
	// overrides remembers the limits defined for Envoy's per-descriptor
	// limit overrides, so that each is defined once per process.
	overrides sync.Map // limit name → struct{}
}

// New returns a Service over limits, with no configuration yet: every
// descriptor is unlimited until SetConfig.
func New(limits shardcounter.LimitService) *Service {
	s := &Service{limits: limits}
	s.cfg.Store(newConfig())
	return s
}

// SetConfig defines the engine limit of each of c's rules (a rule whose
// window changed starts its keys afresh), then serves c. On an error the
// previous configuration stays in force. Limits of rules c no longer
// has are left as they are: `shardcounter limit delete` removes them.
func (s *Service) SetConfig(ctx context.Context, c *Config) error {
	for _, r := range c.rules {
		if r.Limit == "" {
			continue
		}
		if _, _, err := s.limits.CreateLimit(ctx, r.Limit, r.Policy); err != nil {
			return fmt.Errorf("defining limit %q (domain %q, %s): %s", r.Limit, r.Domain, r.Path, shardcounter.ErrorMessage(err))
		}
	}
	s.cfg.Store(c)
	return nil
}

// Config returns the configuration served.
func (s *Service) Config() *Config { return s.cfg.Load() }

// check is what one descriptor of a request asks: its rule and key, and
// the hits it adds.
type check struct {
	rule *Rule
	key  string
	hits uint64
}

// ShouldRateLimit answers a request as envoyproxy/ratelimit does: a status
// a descriptor, OVER_LIMIT overall when any descriptor not in quota mode
// is over, or every one in quota mode is. A descriptor with no matching
// rule is OK with no limit; an unlimited one is OK with MaxUint32
// remaining and takes nothing; a shadow_mode one takes as any other and
// reports OK. Hits are the descriptor's hits_addend when set (0 checks
// without taking), else the request's (0 means 1).
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "rate limit domain is empty: give the domain of the rate_limit filter")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no descriptors: give at least one")
	}
	cfg := s.cfg.Load()
	checks := make([]check, len(req.GetDescriptors()))
	replaced := map[string]bool{}
	for i, d := range req.GetDescriptors() {
		if d.GetIsNegativeHits() {
			return nil, status.Error(codes.InvalidArgument, "negative hits are not supported: a take is never given back")
		}
		c := &checks[i]
		c.hits = max(1, uint64(req.GetHitsAddend()))
		if h := d.GetHitsAddend(); h != nil {
			c.hits = h.GetValue()
		}
		if o := d.GetLimit(); o != nil {
			r, key, err := s.override(ctx, req.GetDomain(), d, o)
			if err != nil {
				return nil, err
			}
			c.rule, c.key = r, key
			continue
		}
		c.rule, c.key = cfg.Match(req.GetDomain(), d.GetEntries())
		if c.rule != nil {
			for _, n := range c.rule.Replaces {
				replaced[n] = true
			}
		}
	}
	for i := range checks {
		if r := checks[i].rule; r != nil && r.Name != "" && replaced[r.Name] {
			checks[i].rule = nil
		}
	}

	resp := &pb.RateLimitResponse{Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(checks))}
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range checks {
		g.Go(func() error {
			st, err := s.take(gctx, c)
			resp.Statuses[i] = st
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, grpcError(err)
	}
	over, quota, quotaOver := false, 0, 0
	for i, c := range checks {
		st := resp.Statuses[i]
		if c.rule == nil || st.Code != pb.RateLimitResponse_OVER_LIMIT {
			if c.rule != nil && c.rule.QuotaMode {
				quota++
			}
			continue
		}
		switch {
		case c.rule.ShadowMode:
			st.Code = pb.RateLimitResponse_OK
		case c.rule.QuotaMode:
			quota++
			quotaOver++
		default:
			over = true
		}
	}
	resp.OverallCode = pb.RateLimitResponse_OK
	if over || (quota > 0 && quota == quotaOver) {
		resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
	}
	return resp, nil
}

// take decides one descriptor: its status, with OVER_LIMIT for a refused
// take even in shadow mode (the caller reports that OK).
func (s *Service) take(ctx context.Context, c check) (*pb.RateLimitResponse_DescriptorStatus, error) {
	r := c.rule
	switch {
	case r == nil:
		return &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}, nil
	case r.Unlimited:
		return &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}, nil
	}
	st := &pb.RateLimitResponse_DescriptorStatus{
		Code:         pb.RateLimitResponse_OK,
		CurrentLimit: &pb.RateLimitResponse_RateLimit{Name: r.Name, RequestsPerUnit: r.RequestsPerUnit, Unit: r.Unit},
	}
	if r.Limit == "" { // 0 requests a unit: over at every hit
		period := units[r.Unit]
		st.DurationUntilReset = durationpb.New(time.Duration(period-time.Now().Unix()%period) * time.Second)
		if c.hits > 0 {
			st.Code = pb.RateLimitResponse_OVER_LIMIT
		}
		return st, nil
	}
	var res *shardcounter.LimitResult
	var err error
	for attempt := 0; ; attempt++ {
		if c.hits == 0 {
			res, err = s.limits.Peek(ctx, r.Limit, c.key, 1)
		} else {
			res, err = s.limits.Take(ctx, r.Limit, c.key, int64(min(c.hits, uint64(shardcounter.MaxLimitQuota)+1)), "")
		}
		if attempt > 0 || shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			break
		}
		// Deleted behind our back (shardcounter limit delete): define it
		// again, as the configuration says.
		if _, _, err = s.limits.CreateLimit(ctx, r.Limit, r.Policy); err != nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	st.DurationUntilReset = durationpb.New(time.Duration(res.ResetAfterMS) * time.Millisecond)
	if c.hits == 0 {
		st.LimitRemaining = uint32(min(res.Remaining, math.MaxUint32))
		return st, nil
	}
	if !res.Allowed {
		st.Code = pb.RateLimitResponse_OVER_LIMIT
		return st, nil
	}
	st.LimitRemaining = uint32(min(res.Remaining, math.MaxUint32))
	return st, nil
}

// override is the rule of a descriptor that carries Envoy's limit
// override: a fixed window of its unit, in a limit named for the domain
// and the override ("envoy!override:" domain ":" N/UNIT, which no rule's
// name starts with), keyed by every entry's key=value; defined on first
// use.
func (s *Service) override(ctx context.Context, domain string, d *rlpb.RateLimitDescriptor, o *rlpb.RateLimitDescriptor_RateLimitOverride) (*Rule, string, error) {
	// envoy.type.v3.RateLimitUnit numbers its units as the response does.
	unit := pb.RateLimitResponse_RateLimit_Unit(o.GetUnit())
	period, ok := units[unit]
	if !ok {
		return nil, "", status.Errorf(codes.InvalidArgument, "the limit override's unit %v is unknown: give SECOND to YEAR", o.GetUnit())
	}
	spec := fmt.Sprintf("%d/%s", o.GetRequestsPerUnit(), unit)
	r := &Rule{
		Domain: domain, Path: "override " + spec, Unit: unit, RequestsPerUnit: o.GetRequestsPerUnit(),
		Policy: shardcounter.LimitPolicy{Kind: shardcounter.LimitFixed, Limit: int64(o.GetRequestsPerUnit()), Period: shardcounter.Duration(time.Duration(period) * time.Second)},
	}
	key := overrideKey(d.GetEntries())
	if o.GetRequestsPerUnit() == 0 {
		return r, key, nil
	}
	r.Limit = "envoy!override:" + escape(domain) + ":" + spec
	if len(r.Limit) > shardcounter.MaxLimitNameLen {
		r.Limit = "envoy#" + hash(r.Limit)
	}
	if _, done := s.overrides.Load(r.Limit); !done {
		if _, _, err := s.limits.CreateLimit(ctx, r.Limit, r.Policy); err != nil {
			return nil, "", grpcError(err)
		}
		s.overrides.Store(r.Limit, struct{}{})
	}
	return r, key, nil
}

// overrideKey is the key of an overridden descriptor: each entry's
// key=value (level), joined by ':'; hashed past MaxIDLen as Rule.key is.
func overrideKey(entries []*rlpb.RateLimitDescriptor_Entry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = level(e.GetKey(), e.GetValue())
	}
	k := strings.Join(parts, ":")
	if k == "" || len(k) > shardcounter.MaxIDLen {
		return "#" + hash(k)
	}
	return k
}

// grpcError maps an engine error to a gRPC status: Envoy's filter then
// applies its failure_mode_deny.
func grpcError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, err.Error())
	}
	msg := shardcounter.ErrorMessage(err)
	switch shardcounter.ErrorCode(err) {
	case shardcounter.EINVALID:
		return status.Error(codes.InvalidArgument, msg)
	case shardcounter.EUNAVAILABLE:
		return status.Error(codes.Unavailable, msg)
	case shardcounter.ENOTFOUND:
		return status.Error(codes.NotFound, msg)
	}
	return status.Error(codes.Internal, msg)
}
