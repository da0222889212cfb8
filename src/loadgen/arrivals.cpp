// Arrival schedule: Gamma/exponential gaps from an Rng seeded separately from the workload (the
// seed is mixed with a constant) so that changing the rate never changes the prompts.
#include "loadgen/arrivals.h"

#include <cmath>

#include "loadgen/rng.h"

namespace keel::loadgen {
namespace {
constexpr uint64_t kArrivalSeedSalt = 0x9e3779b97f4a7c15ULL;
}  // namespace

std::vector<double> sample_interarrival_gaps(int64_t num_requests, double rate, double burstiness,
                                             uint64_t seed) {
  Rng rng(seed ^ kArrivalSeedSalt);
  std::vector<double> gaps(static_cast<size_t>(num_requests < 0 ? 0 : num_requests));
  const double scale = 1.0 / (rate * burstiness);
  for (double& g : gaps) {
    g = burstiness == 1.0 ? rng.exponential(rate) : rng.gamma(burstiness, scale);
  }
  return gaps;
}

std::vector<double> arrival_schedule(int64_t num_requests, double rate, double burstiness,
                                     uint64_t seed) {
  if (std::isinf(rate)) return std::vector<double>(static_cast<size_t>(num_requests), 0.0);
  std::vector<double> t = sample_interarrival_gaps(num_requests, rate, burstiness, seed);
  for (size_t i = 1; i < t.size(); ++i) t[i] += t[i - 1];
  if (!t.empty() && t.back() > 0.0) {
    const double factor = (static_cast<double>(num_requests) / rate) / t.back();
    for (double& v : t) v *= factor;
  }
  return t;
}

}  // namespace keel::loadgen
