// Request arrival schedule, as `vllm bench serve` draws it: inter-arrival gaps from a Gamma
// distribution with shape = burstiness and mean 1/rate (burstiness 1 = exponential gaps, i.e. a
// Poisson process; < 1 burstier, > 1 more regular), accumulated, then scaled so that the last
// arrival falls exactly at num_requests / rate (removes the 1–2% seed-to-seed drift of the total).
// An infinite rate sends everything at time 0.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace keel::loadgen {

// num_requests raw inter-arrival gaps in seconds (Gamma(burstiness, 1/(rate*burstiness))), before
// accumulation and scaling. Requires rate > 0 finite and burstiness > 0.
std::vector<double> sample_interarrival_gaps(int64_t num_requests, double rate, double burstiness,
                                             uint64_t seed);

// Arrival offsets in seconds from the start of the run, non-decreasing, one per request. rate may
// be +infinity (all zeros). Requires rate > 0 and burstiness > 0.
std::vector<double> arrival_schedule(int64_t num_requests, double rate, double burstiness,
                                     uint64_t seed);

}  // namespace keel::loadgen
