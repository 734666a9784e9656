package aws

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/gpubroker/gpubroker/providers/aws/internal/awsdoc"
)

// maxAdvisorBytes bounds the Spot Advisor download (about 1.5 MB today).
const maxAdvisorBytes = 64 << 20

func (s *Source) fetchAdvisor(ctx context.Context) (*awsdoc.Advisor, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.advisorURL, nil)
	if err != nil {
		return nil, fmt.Errorf("spot advisor URL: %w", err)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching spot advisor: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching spot advisor: HTTP %s", resp.Status)
	}
	return awsdoc.ParseAdvisor(io.LimitReader(resp.Body, maxAdvisorBytes))
}
