package rls

import (
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// Register registers s on g as envoy.service.ratelimit.v3.RateLimitService.
func (s *Service) Register(g *grpc.Server) { pb.RegisterRateLimitServiceServer(g, s) }
