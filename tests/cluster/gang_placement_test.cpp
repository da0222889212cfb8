// place_gang: all-or-nothing placement of an instance's processes over cores and memory, with
// eviction of idle lower-priority instances only when needed (fewest, then cheapest), and never of
// a busy or equal/higher-priority one. Pure: no processes.
#include "cluster/policy/gang_placement.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

GangHost host(const std::string& id, int32_t cores, int64_t memory,
              std::vector<HostedProcess> running = {}) {
  GangHost h;
  h.host_id = id;
  h.cores = cores;
  h.memory_bytes = memory;
  h.running = std::move(running);
  return h;
}

HostedProcess proc(const std::string& id, const std::string& instance, int32_t priority,
                   int32_t cores, int64_t memory, bool idle) {
  return {id, instance, priority, cores, memory, idle};
}

// A prefill + decode pair, each process `cores` cores and `memory` bytes.
GangRequest pd_pair(int32_t priority, int32_t cores, int64_t memory) {
  return {"b", priority, {{"prefill", cores, memory}, {"decode", cores, memory}}};
}

GangPlan place(const std::vector<GangHost>& hosts, const GangRequest& r) {
  Result<GangPlan> p = place_gang(hosts, r);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p.ok() ? *p : GangPlan{};
}

TEST(GangPlacementTest, FitsDirectlyWithoutEvicting) {
  const std::vector<GangHost> hosts = {
      host("h1", 4, 8 * kGiB, {proc("a0", "a", 0, 1, kGiB, true)})};
  const GangPlan p = place(hosts, pd_pair(10, 1, kGiB));
  EXPECT_EQ(p.hosts, (std::vector<std::string>{"h1", "h1"}));
  EXPECT_TRUE(p.evict.empty());
}

TEST(GangPlacementTest, SpreadsAcrossHostsWhenNoneHoldsTheWholeGang) {
  // Each host has room for one 2-core process only.
  const std::vector<GangHost> hosts = {host("h1", 2, 8 * kGiB), host("h2", 3, 8 * kGiB)};
  const GangPlan p = place(hosts, pd_pair(0, 2, kGiB));
  EXPECT_EQ(p.hosts, (std::vector<std::string>{"h2", "h1"}));  // most free cores first
  EXPECT_TRUE(p.evict.empty());
}

// An expert-parallel TE and its members, each `cores` cores and `memory` bytes, spread.
GangRequest ep_gang(int n, int32_t cores, int64_t memory) {
  GangRequest r{"moe-ep-0", 0, {}, /*spread=*/true};
  for (int i = 0; i < n; ++i) r.processes.push_back({i == 0 ? "leader" : "member", cores, memory});
  return r;
}

TEST(GangPlacementTest, ASpreadGangPutsEachProcessOnAHostOfItsOwn) {
  // h1 could hold the whole gang (and packing would put it there: the most free cores).
  const std::vector<GangHost> hosts = {host("h1", 8, 8 * kGiB), host("h2", 2, 2 * kGiB)};
  GangRequest r = ep_gang(2, 1, kGiB);
  EXPECT_EQ(place(hosts, r).hosts, (std::vector<std::string>{"h1", "h2"}));
  r.spread = false;
  EXPECT_EQ(place(hosts, r).hosts, (std::vector<std::string>{"h1", "h1"}));
}

TEST(GangPlacementTest, ASpreadGangGoesToHostsWithFreeMemory) {
  // h2 has the cores but not the memory a member reserves: the member goes to h3.
  const std::vector<GangHost> hosts = {host("h1", 8, 8 * kGiB), host("h2", 8, kGiB / 2),
                                       host("h3", 2, 2 * kGiB)};
  EXPECT_EQ(place(hosts, ep_gang(2, 1, kGiB)).hosts, (std::vector<std::string>{"h1", "h3"}));
}

TEST(GangPlacementTest, ASpreadGangIsPackedWhenTheHostsDoNotAllowIt) {
  // Three processes, two hosts: packed as any gang, all placed.
  const std::vector<GangHost> hosts = {host("h1", 4, 8 * kGiB), host("h2", 2, 8 * kGiB)};
  const GangPlan p = place(hosts, ep_gang(3, 1, kGiB));
  EXPECT_EQ(p.hosts, (std::vector<std::string>{"h1", "h1", "h2"}));
  EXPECT_TRUE(p.evict.empty());
}

TEST(GangPlacementTest, NeverEvictsToSpreadAGang) {
  // h2 is full of an idle lower-priority instance; h1 holds the whole gang: no eviction.
  const std::vector<GangHost> hosts = {
      host("h1", 4, 8 * kGiB), host("h2", 1, 8 * kGiB, {proc("a0", "a", -5, 1, kGiB, true)})};
  const GangPlan p = place(hosts, ep_gang(2, 1, kGiB));
  EXPECT_EQ(p.hosts, (std::vector<std::string>{"h1", "h1"}));
  EXPECT_TRUE(p.evict.empty());
}

TEST(GangPlacementTest, BacktracksToFindAFitGreedyOrderWouldMiss) {
  // h1 has the most cores but too little memory for "big": only h2 can take it.
  const std::vector<GangHost> hosts = {host("h1", 4, 1 * kGiB), host("h2", 3, 4 * kGiB)};
  const GangRequest r{"b", 0, {{"small", 1, kGiB / 2}, {"big", 3, 3 * kGiB}}};
  EXPECT_EQ(place(hosts, r).hosts, (std::vector<std::string>{"h1", "h2"}));
}

TEST(GangPlacementTest, DoesNotFitAtAllPlacesNothing) {
  const std::vector<GangHost> hosts = {host("h1", 2, 8 * kGiB, {proc("a0", "a", 0, 1, kGiB, true)}),
                                       host("h2", 1, 8 * kGiB)};
  // Three cores per process: no host has that many even empty.
  Result<GangPlan> p = place_gang(hosts, pd_pair(10, 3, kGiB));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find("h1: 1 cores"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("evictable: a (priority 0)"), std::string::npos);
}

TEST(GangPlacementTest, AllOrNothingWhenOnlyOneProcessWouldFit) {
  const std::vector<GangHost> hosts = {host("h1", 1, 8 * kGiB)};
  Result<GangPlan> p = place_gang(hosts, pd_pair(0, 1, kGiB));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted);
}

TEST(GangPlacementTest, FitsOnlyAfterEvictingAnIdleLowerPriorityInstance) {
  const std::vector<GangHost> hosts = {
      host("h1", 2, 8 * kGiB, {proc("a-te-0", "a", 0, 1, kGiB, true)})};
  const GangPlan p = place(hosts, pd_pair(10, 1, kGiB));
  EXPECT_EQ(p.evict, (std::vector<std::string>{"a"}));
  EXPECT_EQ(p.hosts, (std::vector<std::string>{"h1", "h1"}));
}

TEST(GangPlacementTest, EvictsAWholeInstanceAcrossHosts) {
  // Instance "a" is a P+D pair over two hosts: evicting it frees a core on each.
  const std::vector<GangHost> hosts = {
      host("h1", 1, 8 * kGiB, {proc("a-p", "a", 0, 1, kGiB, true)}),
      host("h2", 1, 8 * kGiB, {proc("a-d", "a", 0, 1, kGiB, true)})};
  const GangPlan p = place(hosts, pd_pair(5, 1, kGiB));
  EXPECT_EQ(p.evict, (std::vector<std::string>{"a"}));
  EXPECT_EQ(p.hosts, (std::vector<std::string>{"h1", "h2"}));
}

TEST(GangPlacementTest, NeverEvictsABusyInstance) {
  const std::vector<GangHost> hosts = {
      host("h1", 2, 8 * kGiB, {proc("a-te-0", "a", 0, 1, kGiB, false)})};
  Result<GangPlan> p = place_gang(hosts, pd_pair(10, 1, kGiB));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find("evictable: none"), std::string::npos);
}

TEST(GangPlacementTest, AnInstanceWithOneBusyProcessIsBusy) {
  const std::vector<GangHost> hosts = {
      host("h1", 1, 8 * kGiB, {proc("a-p", "a", 0, 1, kGiB, true)}),
      host("h2", 1, 8 * kGiB, {proc("a-d", "a", 0, 1, kGiB, false)})};
  EXPECT_FALSE(place_gang(hosts, pd_pair(5, 1, kGiB)).ok());
}

// A pipeline's stage 1 (no queue, no JE reports it) as its instance's placer sees it.
HostedProcess stage(const std::string& id, const std::string& instance, int32_t priority,
                    int32_t cores, int64_t memory) {
  HostedProcess p = proc(id, instance, priority, cores, memory, /*idle=*/false);
  p.follows_instance = true;
  return p;
}

TEST(GangPlacementTest, APipelineStageIsAsIdleAsItsInstance) {
  // "a" is a pipelined TE: stage 0 on h1 (idle as its JE reports), stage 1 on h2 (its own idle
  // flag false: nothing reports it). The instance is idle, so both processes' room is freed.
  const std::vector<GangHost> hosts = {
      host("h1", 1, 8 * kGiB, {proc("a-te-0", "a", 0, 1, kGiB, true)}),
      host("h2", 1, 8 * kGiB, {stage("a-te-0-stage1", "a", 0, 1, kGiB)})};
  const GangPlan p = place(hosts, pd_pair(5, 1, kGiB));
  EXPECT_EQ(p.evict, (std::vector<std::string>{"a"}));
  EXPECT_EQ(p.hosts, (std::vector<std::string>{"h1", "h2"}));
  // Stage 0 busy: the instance is busy whatever the stage says.
  const std::vector<GangHost> busy = {
      host("h1", 1, 8 * kGiB, {proc("a-te-0", "a", 0, 1, kGiB, false)}),
      host("h2", 1, 8 * kGiB, {stage("a-te-0-stage1", "a", 0, 1, kGiB)})};
  EXPECT_FALSE(place_gang(busy, pd_pair(5, 1, kGiB)).ok());
}

TEST(GangPlacementTest, AnInstanceOfOnlyStagesIsNeverEvicted) {
  // Its stage 0 is not reported (gone, or not yet seen): never evicted unseen.
  const std::vector<GangHost> hosts = {
      host("h1", 2, 8 * kGiB, {stage("a-te-0-stage1", "a", 0, 1, kGiB)})};
  Result<GangPlan> p = place_gang(hosts, pd_pair(5, 1, kGiB));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("evictable: none"), std::string::npos);
}

TEST(GangPlacementTest, NeverEvictsEqualOrHigherPriority) {
  for (int32_t other : {10, 11}) {
    const std::vector<GangHost> hosts = {
        host("h1", 2, 8 * kGiB, {proc("a-te-0", "a", other, 1, kGiB, true)})};
    Result<GangPlan> p = place_gang(hosts, pd_pair(10, 1, kGiB));
    ASSERT_FALSE(p.ok()) << "priority " << other;
    EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted);
  }
}

TEST(GangPlacementTest, MemoryBoundEvictsTheInstanceHoldingMemory) {
  // Cores are plentiful; memory is short. "small" holds 1 GiB (not enough freed), "big" 4 GiB.
  const std::vector<GangHost> hosts = {host(
      "h1", 16, 6 * kGiB,
      {proc("small-0", "small", 0, 1, kGiB, true), proc("big-0", "big", 0, 1, 4 * kGiB, true)})};
  const GangPlan p = place(hosts, pd_pair(1, 1, 2 * kGiB));
  EXPECT_EQ(p.evict, (std::vector<std::string>{"big"}));
}

TEST(GangPlacementTest, CoreBoundEvictsTheInstanceHoldingCores) {
  // Memory is plentiful; cores are short. "thin" holds 1 core, "wide" 3.
  const std::vector<GangHost> hosts = {
      host("h1", 4, 64 * kGiB,
           {proc("thin-0", "thin", 0, 1, kGiB, true), proc("wide-0", "wide", 0, 3, kGiB, true)})};
  const GangPlan p = place(hosts, pd_pair(1, 1, kGiB));
  EXPECT_EQ(p.evict, (std::vector<std::string>{"wide"}));
}

TEST(GangPlacementTest, FewestThenCheapestVictims) {
  // Two 1-core instances at priority 0 or one 2-core instance at priority 3 would each make room
  // for 2 cores: the single eviction wins over two cheaper ones.
  const std::vector<GangHost> hosts = {
      host("h1", 4, 64 * kGiB,
           {proc("x-0", "x", 0, 1, kGiB, true), proc("y-0", "y", 0, 1, kGiB, true),
            proc("z-0", "z", 3, 2, kGiB, true)})};
  EXPECT_EQ(place(hosts, pd_pair(5, 1, kGiB)).evict, (std::vector<std::string>{"z"}));
  // Needing one core: x and y tie on everything but their ids.
  const GangRequest one{"b", 5, {{"te", 1, kGiB}}};
  EXPECT_EQ(place(hosts, one).evict, (std::vector<std::string>{"x"}));
  // Three cores need two victims; of the pairs, the lowest summed priority: w (1) with x (0),
  // rather than x or y with z (3).
  std::vector<GangHost> more = hosts;
  more[0].cores = 6;
  more[0].running.push_back(proc("w-0", "w", 1, 2, kGiB, true));
  const GangRequest three{"b", 5, {{"te", 3, kGiB}}};
  EXPECT_EQ(place(more, three).evict, (std::vector<std::string>{"w", "x"}));
}

TEST(GangPlacementTest, SlotsBoundTheProcesses) {
  GangHost h = host("h1", 8, 8 * kGiB, {proc("a-0", "a", 0, 1, kGiB, true)});
  h.max_processes = 2;
  const GangPlan p = place({h}, pd_pair(1, 1, kGiB));
  EXPECT_EQ(p.evict, (std::vector<std::string>{"a"}));
}

TEST(GangPlacementTest, DeterministicWhateverTheHostOrder) {
  const std::vector<GangHost> hosts = {
      host("h2", 2, 8 * kGiB, {proc("a-0", "a", 0, 1, kGiB, true)}),
      host("h1", 2, 8 * kGiB, {proc("c-0", "c", 0, 1, kGiB, true)}), host("h3", 1, 8 * kGiB)};
  std::vector<GangHost> reversed(hosts.rbegin(), hosts.rend());
  const GangRequest r{"b", 9, {{"prefill", 2, kGiB}, {"decode", 1, kGiB}}};
  const GangPlan p = place(hosts, r);
  EXPECT_EQ(p, place(reversed, r));
  EXPECT_EQ(p, place(hosts, r));
  EXPECT_EQ(p.evict, (std::vector<std::string>{"a"}));  // a and c tie: the smaller id
  EXPECT_EQ(p.hosts, (std::vector<std::string>{"h2", "h3"}));
}

TEST(GangPlacementTest, RejectsMalformedRequests) {
  EXPECT_EQ(place_gang({host("h1", 4, kGiB)}, {"b", 0, {}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(place_gang({host("h1", 4, kGiB)}, {"b", 0, {{"p", 0, 0}}}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::cluster
