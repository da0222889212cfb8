// Fair admission among tenants by a virtual token counter (VTC; Sheng et al., "Fairness in
// Serving Large Language Models", OSDI'24), as pure step functions over a snapshot of counters.
// Each tenant's counter is the weighted service it has received, divided by its weight: input
// (prompt) tokens count kVtcInputWeight each when a request is admitted, output tokens
// kVtcOutputWeight each as they are generated (the paper's w_p = 1, w_q = 2). Admission takes the
// earliest waiting request of the backlogged tenant with the least counter; a tenant that becomes
// backlogged is first lifted to the least counter of those already backlogged (or, when none is,
// to the counter of the last tenant whose backlog emptied), so idle time earns no credit.
//
// Invariants: counters never decrease. Thread safety: plain values; the Scheduler (engine thread)
// owns its VtcCounters.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace keel::engine {

inline constexpr double kVtcInputWeight = 1.0;   // per prompt token
inline constexpr double kVtcOutputWeight = 2.0;  // per generated token

struct VtcCounters {
  // Per tenant ("" is the tenant of requests that name none): weighted service / weight.
  std::map<std::string, double, std::less<>> counter;
  // The tenant whose backlog emptied last ("" before any did, or when that was tenant "").
  std::string last_drained;
  bool any_drained = false;
};

// The counter of `tenant` (0 for one never seen).
[[nodiscard]] double vtc_counter(const VtcCounters& c, std::string_view tenant);

// `tenant` becomes backlogged (its first waiting request arrives) while `backlogged` (the other
// tenants with waiting requests; `tenant` itself is ignored there) are: lifts its counter.
void vtc_arrive(VtcCounters* c, std::string_view tenant,
                std::span<const std::string_view> backlogged);

// `tenant`'s last waiting request was admitted (its backlog emptied).
void vtc_drained(VtcCounters* c, std::string_view tenant);

// Of the waiting requests, given in queue order by their tenants, the index of the one to admit
// next: the earliest of the tenant with the least counter (ties: the tenant queued first).
// nullopt when `queue` is empty.
[[nodiscard]] std::optional<size_t> vtc_pick(const VtcCounters& c,
                                             std::span<const std::string_view> queue);

// Service given to `tenant` (weight > 0): input and output tokens.
void vtc_charge(VtcCounters* c, std::string_view tenant, double weight, int64_t input_tokens,
                int64_t output_tokens);

}  // namespace keel::engine
