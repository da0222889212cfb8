// The fleet dashboard: GET /dashboard on a gateway (a server with ServerDeps::cluster_status) —
// one self-contained HTML page, inline CSS and JS, no external assets. Every second it polls
// GET /v1/cluster/status and GET /metrics and shows the task executors by role and state (queues,
// KV use, prefix-cache hit rates), the job executor's jobs, the router's counters and its recent
// decisions (the counters' changes between polls), and the scale-out side: the fleet's size over
// time (a timeline drawn from the polls) and the warm-pool scale-out phases from /metrics
// (keel:scale_out_phase_seconds, keel:scale_out_first_token_seconds), the autoscaler's groups,
// and latency and error rates over time: TTFT and TPOT p50/p99 and the share of finished requests
// that failed or were aborted, each point over the last 30 polls (from the differences of the
// cumulative histograms and counters in /metrics; since the gateway started while the page is
// younger). A TE shows idle or busy from its queue, or hung, dead or unhealthy.
// Each TE row has id "te-<TE id>" (tests find them in the DOM). With --api-key, open it as
// /dashboard#key=KEY: the page sends the key with its requests.
// Thread safety: a constant.
#pragma once

#include <string_view>

namespace keel::server {

inline constexpr std::string_view kDashboardPath = "/dashboard";

[[nodiscard]] std::string_view dashboard_html();

}  // namespace keel::server
