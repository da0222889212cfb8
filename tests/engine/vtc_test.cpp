// VTC fair admission (engine/vtc.h): the step functions alone, a simulated batch of two
// backlogged tenants (one sending 4x the tokens: the service difference stays within VTC's bound,
// where first-come-first-served drifts without one; weights 2:1 give 2:1 service; a lone tenant
// gets every slot), the lift of a newly active tenant, and the Scheduler admitting by VTC.
#include "engine/vtc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "sim_util.h"

namespace keel::engine {
namespace {

using Views = std::vector<std::string_view>;

TEST(VtcTest, PicksEarliestRequestOfTheLeastServedTenant) {
  VtcCounters c;
  EXPECT_FALSE(vtc_pick(c, Views{}).has_value());
  vtc_charge(&c, "a", 1.0, 10, 0);
  vtc_charge(&c, "b", 1.0, 4, 1);  // 4 + 2
  EXPECT_DOUBLE_EQ(vtc_counter(c, "b"), 6.0);
  EXPECT_EQ(vtc_pick(c, Views{"a", "a", "b", "b"}), 2u);
  vtc_charge(&c, "b", 2.0, 0, 4);  // weight 2: 8 / 2
  EXPECT_DOUBLE_EQ(vtc_counter(c, "b"), 10.0);
  EXPECT_EQ(vtc_pick(c, Views{"b", "a"}), 0u);  // a tie goes to the tenant queued first
}

TEST(VtcTest, NewlyActiveTenantIsLiftedToTheLeastBackloggedCounter) {
  VtcCounters c;
  vtc_charge(&c, "a", 1.0, 1000, 0);
  vtc_charge(&c, "c", 1.0, 700, 0);
  vtc_arrive(&c, "b", Views{"a", "c", "a"});
  EXPECT_DOUBLE_EQ(vtc_counter(c, "b"), 700.0);  // the minimum of the backlogged, not the max
  // A tenant already past the floor keeps its counter (counters never decrease).
  vtc_charge(&c, "d", 1.0, 5000, 0);
  vtc_arrive(&c, "d", Views{"a"});
  EXPECT_DOUBLE_EQ(vtc_counter(c, "d"), 5000.0);
  // Nobody waits: lifted to the tenant whose backlog emptied last.
  vtc_drained(&c, "a");
  vtc_arrive(&c, "e", Views{});
  EXPECT_DOUBLE_EQ(vtc_counter(c, "e"), 1000.0);
  // The arriving tenant itself in the list is ignored.
  vtc_arrive(&c, "f", Views{"f"});
  EXPECT_DOUBLE_EQ(vtc_counter(c, "f"), 1000.0);
}

// A batch of `slots` running requests; each step admits waiting requests into free slots (by VTC
// or FCFS) and generates one token per running request. Both tenants always have work queued.
struct SimTenant {
  std::string name;
  double weight = 1.0;
  int64_t input = 0;   // tokens per request
  int64_t output = 0;  // tokens per request
  double service = 0;  // weighted tokens served (input at admission, output as generated)
};

struct SimResult {
  double max_difference = 0;  // of weighted service / weight, over every step
};

SimResult simulate(std::vector<SimTenant>* tenants, int slots, int steps, bool fcfs) {
  struct Req {
    size_t tenant;
    int64_t left;
  };
  VtcCounters c;
  std::deque<size_t> queue;       // tenant of each waiting request, arrival order
  for (int i = 0; i < 64; ++i) {  // both keep 32 requests queued, interleaved
    for (size_t t = 0; t < tenants->size(); ++t) queue.push_back(t);
  }
  std::vector<Req> running;
  SimResult r;
  for (int step = 0; step < steps; ++step) {
    while (static_cast<int>(running.size()) < slots) {
      size_t idx = 0;
      if (!fcfs) {
        Views names;
        for (size_t t : queue) names.push_back((*tenants)[t].name);
        idx = *vtc_pick(c, names);
      }
      const size_t t = queue[idx];
      queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(idx));
      queue.push_back(t);  // backlogged: another request of t arrives
      SimTenant& st = (*tenants)[t];
      vtc_charge(&c, st.name, st.weight, st.input, 0);
      st.service += kVtcInputWeight * static_cast<double>(st.input);
      running.push_back({t, st.output});
    }
    for (Req& q : running) {
      SimTenant& st = (*tenants)[q.tenant];
      vtc_charge(&c, st.name, st.weight, 0, 1);
      st.service += kVtcOutputWeight;
      --q.left;
    }
    std::erase_if(running, [](const Req& q) { return q.left == 0; });
    const SimTenant& a = (*tenants)[0];
    const SimTenant& b = (*tenants)[1];
    r.max_difference =
        std::max(r.max_difference, std::abs(a.service / a.weight - b.service / b.weight));
  }
  return r;
}

TEST(VtcTest, TwoBackloggedTenantsOneSendingFourTimesTheTokensStayWithinTheBound) {
  constexpr int kSlots = 8;
  std::vector<SimTenant> vtc = {{"light", 1.0, 64, 64}, {"heavy", 1.0, 256, 256}};
  std::vector<SimTenant> fcfs = vtc;
  const SimResult v = simulate(&vtc, kSlots, 20'000, /*fcfs=*/false);
  const SimResult f = simulate(&fcfs, kSlots, 20'000, /*fcfs=*/true);
  // VTC's bound (Theorem 4.4): 2 * (w_p * L_input + w_q * M), M the tokens a batch holds.
  const double m = kSlots * (256.0 + 256.0);
  const double bound = 2 * (kVtcInputWeight * 256 + kVtcOutputWeight * m);
  EXPECT_LE(v.max_difference, bound);
  EXPECT_NEAR(vtc[0].service / vtc[1].service, 1.0, 0.05);
  // First come, first served gives the heavy tenant ~4x: the difference grows past the bound.
  EXPECT_GT(f.max_difference, 4 * bound);
  EXPECT_GT(fcfs[1].service / fcfs[0].service, 3.5);
}

TEST(VtcTest, WeightsTwoToOneGiveTwiceTheService) {
  std::vector<SimTenant> t = {{"gold", 2.0, 64, 64}, {"bronze", 1.0, 64, 64}};
  simulate(&t, 8, 20'000, false);
  EXPECT_NEAR(t[0].service / t[1].service, 2.0, 0.2);
}

TEST(VtcTest, LoneTenantGetsEverySlot) {
  VtcCounters c;
  vtc_charge(&c, "alone", 1.0, 1'000'000, 0);  // however much it was served already
  EXPECT_EQ(vtc_pick(c, Views{"alone", "alone"}), 0u);
  std::vector<SimTenant> t = {{"alone", 1.0, 64, 64}, {"alone", 1.0, 64, 64}};
  simulate(&t, 8, 1000, false);
  // 8 slots x 1000 steps of output, plus the inputs of the requests admitted.
  EXPECT_GE((t[0].service + t[1].service), 8 * 1000 * kVtcOutputWeight);
}

// The Scheduler admits by VTC: one slot, tenant a's second request waits behind b's.
TEST(VtcTest, SchedulerAdmitsTheLeastServedTenantFirst) {
  kv::KvCacheManager kv(kv::KvCacheConfig{64, 4, true});
  Scheduler sched(SchedulerConfig{1, 64, 256, 0}, &kv);
  const kv::BlockHash extra = kv::request_extra_key(kv::BlockHash{3, 4}, "");
  std::vector<std::unique_ptr<RequestState>> states;
  const auto add = [&](RequestKey key, const char* tenant) {
    auto r = std::make_unique<RequestState>();
    r->key = key;
    r->tokens.assign(8, 0);
    std::iota(r->tokens.begin(), r->tokens.end(), static_cast<int32_t>(100 + 10 * key));
    r->num_prompt_tokens = 8;
    r->max_tokens = 2;
    r->extra_key = extra;
    r->tenant = tenant;
    sched.add(r.get());
    states.push_back(std::move(r));
  };
  add(1, "a");
  add(2, "a");
  add(3, "b");
  const std::vector<RequestKey> order = testing::run_in_order(sched, states, 20);
  EXPECT_EQ(order, (std::vector<RequestKey>{1, 3, 2}));  // FCFS would run 1, 2, 3
  // a: 8 prompt + 2 x 2 output for each of its two requests; b: one request.
  EXPECT_DOUBLE_EQ(vtc_counter(sched.vtc(), "a"), 24.0);
  EXPECT_DOUBLE_EQ(vtc_counter(sched.vtc(), "b"), 12.0);
}

}  // namespace
}  // namespace keel::engine
