// ClusterNodes (control/placement/cluster_nodes.h) with no process and no socket: node agents and
// JEs are fake peers behind a fake Caller, the membership is an embedded store on a manual clock.
// Shown: a gang starts all or nothing; an idle lower-priority instance is drained, stopped and
// forgotten before a higher one starts, a busy one never; every command carries the manager's
// fencing token and a stale manager is refused; a new leader adopts the TEs still registered and
// starts only the rest; an expert-parallel TE is placed with its members spread over the hosts,
// given their addresses, and replaced whole (new ids) when a member is lost.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/policy/leader_fence.h"
#include "cluster/policy/node_capacity.h"
#include "cluster/protocol/fleet.h"
#include "cluster/protocol/messages.h"
#include "cluster/protocol/node_messages.h"
#include "control/fake_caller.h"
#include "control/placement/cluster_nodes.h"
#include "control/placement/gang_watch.h"
#include "core/clock.h"
#include "membership/embedded_membership.h"
#include "membership/embedded_store.h"

namespace keel::control {
namespace {

using cluster::Json;
using membership::Member;
using membership::MemberKind;
using net::Message;

// A node agent as the manager sees it: its capacity in the membership (republished on every
// change, as the real one does), start_te / stop_te / fence answered behind the same fence rule.
class FakeAgent {
 public:
  FakeAgent(membership::EmbeddedStore* store, FakeCaller* net, std::string host, int32_t cores,
            int64_t memory)
      : net_(net) {
    cap_.host_id = std::move(host);
    cap_.address = cap_.host_id + ":9000";
    cap_.cores = cores;
    cap_.memory_total_bytes = memory;
    cap_.memory_available_bytes = memory;
    cap_.max_tes = 8;
    session_ = std::move(*membership::EmbeddedMembership::open(store, {}));
    net_->serve(cap_.address, [this](const net::Message& m) { return handle(m); });
    publish();
  }
  const std::string& address() const { return cap_.address; }
  const std::string& host() const { return cap_.host_id; }
  // Process `id` exits on its own: the agent no longer lists it.
  void exit(const std::string& id) {
    std::erase_if(cap_.tes, [&](const cluster::HostedTe& t) { return t.id == id; });
    publish();
  }
  std::vector<std::string> running() const {
    std::vector<std::string> ids;
    for (const cluster::HostedTe& t : cap_.tes) ids.push_back(t.id);
    return ids;
  }
  // Starts and stops refused from now on (an agent whose host cannot start the TE).
  bool fail_starts = false;
  std::vector<cluster::StartTe> starts;  // admitted, in order
  std::vector<cluster::StopTe> stops;    // admitted, in order
  cluster::LeaderFence fence;

 private:
  void publish() {
    cap_.running_tes = static_cast<int32_t>(cap_.tes.size());
    ASSERT_TRUE(session_
                    ->register_member({MemberKind::kNode, cap_.host_id, cap_.address,
                                       cluster::capacity_attributes(cap_)})
                    .ok());
  }
  Result<Json> handle(const net::Message& m) {
    if (m.type == cluster::msg::kFence) {
      KEEL_ASSIGN_OR_RETURN(cluster::Fence f, cluster::decode_fence(m.body));
      return cluster::status_body(fence.admit(f.election, f.fence));
    }
    if (m.type == cluster::msg::kStopTe) {
      KEEL_ASSIGN_OR_RETURN(cluster::StopTe s, cluster::decode_stop_te(m.body));
      if (Status a = fence.admit(s.election, s.fence); !a.ok()) return cluster::status_body(a);
      const size_t before = cap_.tes.size();
      std::erase_if(cap_.tes, [&](const cluster::HostedTe& t) { return t.id == s.id; });
      if (before == cap_.tes.size()) return cluster::status_body(Status::not_found(s.id));
      stops.push_back(s);
      cap_.stopped.push_back(s.id);
      publish();
      return cluster::status_body({});
    }
    KEEL_ASSIGN_OR_RETURN(cluster::StartTe s, cluster::decode_start_te(m.body));
    cluster::StartTeReply r;
    r.status = fence.admit(s.election, s.fence);
    if (r.status.ok() && fail_starts) r.status = Status::internal("te " + s.id + " did not start");
    if (r.status.ok()) {
      starts.push_back(s);
      cap_.tes.push_back({s.id, s.instance, s.priority, s.threads, s.memory_bytes, s.role});
      publish();
      r.id = s.id;
      r.address = cap_.host_id + ":" + std::to_string(7000 + next_port_++);
      r.pid = 100 + next_port_;
    }
    return cluster::encode_body(r);
  }

  FakeCaller* net_;
  cluster::NodeCapacity cap_;
  std::unique_ptr<membership::EmbeddedMembership> session_;
  int next_port_ = 0;
};

// A JE listing TEs with their load; it records the remove_te calls it gets.
class FakeJe {
 public:
  FakeJe(membership::Membership* manager, FakeCaller* net, std::string address) {
    net->serve(address, [this](const net::Message& m) -> Result<Json> {
      if (m.type == cluster::msg::kRemoveTe) {
        KEEL_ASSIGN_OR_RETURN(cluster::RemoveTe r, cluster::decode_remove_te(m.body));
        removes.push_back(r);
        return cluster::status_body({});
      }
      cluster::FleetStatus f;
      f.je_id = "je-0";
      f.fleet.tes = tes;
      return cluster::encode_body(f);
    });
    EXPECT_TRUE(manager->register_member({MemberKind::kJobExecutor, "je-0", address, {}}).ok());
  }
  // Lists TE `id` at `address`, busy or idle.
  void list(const std::string& id, const std::string& address, bool busy) {
    cluster::TeInfo t;
    t.id = id;
    t.address = address;
    t.model = "m";
    t.load.num_running = busy ? 1 : 0;
    tes.push_back(t);
  }
  std::vector<cluster::TeInfo> tes;
  std::vector<cluster::RemoveTe> removes;
};

cluster::StartTe te(const std::string& id, const std::string& role, int32_t threads) {
  cluster::StartTe s;
  s.id = id;
  s.model_path = "/models/m.gguf";
  s.role = role;
  s.threads = threads;
  s.memory_bytes = int64_t{1} << 30;
  return s;
}

class ClusterNodesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    manager_ = std::move(*membership::EmbeddedMembership::open(&store_, {}));
  }
  // A manager leading election "m" with fencing token `token`.
  std::unique_ptr<ClusterNodes> nodes(int64_t token) {
    ClusterNodesConfig c;
    c.model = "m";
    c.election = "m";
    c.fence = [token] { return token; };
    c.caller = net_;
    c.clock = &clock_;
    c.drain_grace = std::chrono::milliseconds(100);
    return std::make_unique<ClusterNodes>(std::move(c));
  }

  ManualClock clock_;
  membership::EmbeddedStore store_{&clock_};
  std::unique_ptr<membership::EmbeddedMembership> manager_;
  std::shared_ptr<FakeCaller> net_ = std::make_shared<FakeCaller>();
};

TEST_F(ClusterNodesTest, APrefillDecodePairStartsTogetherOrNotAtAll) {
  FakeAgent a(&store_, net_.get(), "host-a", 4, int64_t{8} << 30);
  FakeAgent b(&store_, net_.get(), "host-b", 4, int64_t{8} << 30);
  std::unique_ptr<ClusterNodes> n = nodes(1);

  // 3 + 3 cores: one host cannot hold both; the pair is split across the two.
  const ModelGangs g = model_gangs("m", 0, {te("p", "prefill", 3), te("d", "decode", 3)});
  ASSERT_EQ(g.gangs.size(), 1u);
  EXPECT_EQ(g.gangs[0].instance, "m-pd-0");
  Result<std::vector<RemoteTe>> started = n->start_gangs(*manager_, g.gangs);
  ASSERT_TRUE(started.ok()) << started.status().to_string();
  ASSERT_EQ(started->size(), 2u);
  EXPECT_NE((*started)[0].host_id, (*started)[1].host_id);
  EXPECT_EQ(a.starts.size() + b.starts.size(), 2u);
  for (const FakeAgent* x : {&a, &b}) {
    for (const cluster::StartTe& s : x->starts) EXPECT_EQ(s.instance, "m-pd-0");
  }

  // The next pair's second start fails: its first TE is stopped again, nothing of it is left.
  FakeAgent c(&store_, net_.get(), "host-c", 4, int64_t{8} << 30);
  FakeAgent d(&store_, net_.get(), "host-d", 4, int64_t{8} << 30);
  d.fail_starts = true;
  const ModelGangs g2 = model_gangs("m", 0, {te("p2", "prefill", 3), te("d2", "decode", 3)});
  Result<std::vector<RemoteTe>> second = n->start_gang(*manager_, g2.gangs[0]);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("did not start"), std::string::npos)
      << second.status().to_string();
  EXPECT_TRUE(c.running().empty());
  EXPECT_TRUE(d.running().empty());
  EXPECT_EQ(a.running().size() + b.running().size(), 2u);  // the first pair untouched

  // A gang no host can hold is refused by name and counted; nothing is started.
  Result<std::vector<RemoteTe>> huge =
      n->start_gang(*manager_, {"m-huge", 0, {te("h", "colocated", 64)}});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted) << huge.status().to_string();
  EXPECT_NE(n->metrics_text().find("keel:gang_unplaceable_total{model_name=\"m\"} 1"),
            std::string::npos);
  EXPECT_NE(n->metrics_text().find("keel:gang_placements_total{model_name=\"m\"} 1"),
            std::string::npos);
}

TEST_F(ClusterNodesTest, AnIdleLowerPriorityInstanceIsDrainedStoppedAndForgottenFirst) {
  FakeAgent a(&store_, net_.get(), "host-a", 4, int64_t{8} << 30);
  FakeJe je(manager_.get(), net_.get(), "je:1");
  std::unique_ptr<ClusterNodes> low = nodes(1);
  Result<std::vector<RemoteTe>> started =
      low->start_gang(*manager_, {"m-low", 0, {te("low-0", "colocated", 4)}});
  ASSERT_TRUE(started.ok()) << started.status().to_string();
  const std::string low_address = (*started)[0].address;

  // Busy: the higher-priority gang does not fit and nothing is evicted.
  je.list("low-0", low_address, /*busy=*/true);
  std::unique_ptr<ClusterNodes> high = nodes(1);
  Result<std::vector<RemoteTe>> refused =
      high->start_gang(*manager_, {"m-high", 5, {te("high-0", "colocated", 4)}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(a.running(), std::vector<std::string>{"low-0"});
  EXPECT_TRUE(je.removes.empty());

  // Idle: drained at its JE, stopped through its agent, forgotten at its JE, then the new one.
  je.tes.clear();
  je.list("low-0", low_address, /*busy=*/false);
  const size_t before = net_->calls.size();
  Result<std::vector<RemoteTe>> placed =
      high->start_gang(*manager_, {"m-high", 5, {te("high-0", "colocated", 4)}});
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_EQ(a.running(), std::vector<std::string>{"high-0"});
  ASSERT_EQ(je.removes.size(), 2u);
  EXPECT_EQ(je.removes[0], (cluster::RemoveTe{low_address, false}));
  EXPECT_EQ(je.removes[1], (cluster::RemoveTe{low_address, true}));
  ASSERT_EQ(a.stops.size(), 1u);
  EXPECT_EQ(a.stops[0].id, "low-0");
  EXPECT_EQ(a.stops[0].grace_ms, 100);
  const std::vector<std::string> calls(net_->calls.begin() + static_cast<ptrdiff_t>(before),
                                       net_->calls.end());
  EXPECT_EQ(calls, (std::vector<std::string>{"je:1 fleet", "je:1 remove_te", "host-a:9000 stop_te",
                                             "je:1 remove_te", "host-a:9000 start_te"}));
  EXPECT_NE(high->metrics_text().find("keel:gang_evictions_total{model_name=\"m\"} 1"),
            std::string::npos);
}

TEST_F(ClusterNodesTest, EveryCommandCarriesTheFencingTokenAndAStaleManagerIsRefused) {
  FakeAgent a(&store_, net_.get(), "host-a", 8, int64_t{8} << 30);
  FakeAgent cut_off(&store_, net_.get(), "host-b", 1, int64_t{8} << 30);  // placed last
  net_->unplug(cut_off.address());  // an agent that cannot be reached is skipped, not waited on
  std::unique_ptr<ClusterNodes> old_leader = nodes(3);
  ASSERT_TRUE(old_leader->announce(*manager_).ok());
  EXPECT_EQ(a.fence.highest("m"), 3);
  Result<std::vector<RemoteTe>> started =
      old_leader->start_gang(*manager_, {"m-te-0", 0, {te("te-0", "colocated", 1)}});
  ASSERT_TRUE(started.ok()) << started.status().to_string();
  ASSERT_EQ(a.starts.size(), 1u);
  EXPECT_EQ(a.starts[0].election, "m");
  EXPECT_EQ(a.starts[0].fence, 3);

  // The successor (token 4) announces itself; the old leader, stalled past its lease, is refused.
  std::unique_ptr<ClusterNodes> successor = nodes(4);
  ASSERT_TRUE(successor->announce(*manager_).ok());
  EXPECT_EQ(a.fence.highest("m"), 4);
  const Status stop = old_leader->stop_te("te-0", std::chrono::milliseconds(100));
  EXPECT_EQ(stop.code(), StatusCode::kFailedPrecondition) << stop.to_string();
  EXPECT_EQ(a.running(), std::vector<std::string>{"te-0"});
  Result<std::vector<RemoteTe>> late =
      old_leader->start_gang(*manager_, {"m-te-1", 0, {te("te-1", "colocated", 1)}});
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kFailedPrecondition) << late.status().to_string();
  const Status stale = old_leader->announce(*manager_);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition) << stale.to_string();
  EXPECT_EQ(a.starts.size(), 1u);
}

TEST_F(ClusterNodesTest, ANewLeaderAdoptsTheRegisteredTesAndStartsOnlyTheMissingOnes) {
  FakeAgent a(&store_, net_.get(), "host-a", 8, int64_t{8} << 30);
  // The previous leader's TEs that outlived it: two colocated of model m (one of another model).
  auto te_session = std::move(*membership::EmbeddedMembership::open(&store_, {}));
  for (const auto& [id, model] : std::vector<std::pair<std::string, std::string>>{
           {"m-te-0", "m"}, {"m-te-1", "m"}, {"x-te-0", "x"}}) {
    ASSERT_TRUE(te_session
                    ->register_member({MemberKind::kTaskExecutor,
                                       id,
                                       "host-a:7100",
                                       {{"model", model}, {"role", "colocated"}}})
                    .ok());
  }
  std::unique_ptr<ClusterNodes> n = nodes(2);
  size_t adopted = 0;
  Result<std::vector<RemoteTe>> tes = n->take_over(
      *manager_, "m", {te("", "colocated", 1), te("", "colocated", 1), te("", "colocated", 1)}, 0,
      &adopted);
  ASSERT_TRUE(tes.ok()) << tes.status().to_string();
  EXPECT_EQ(adopted, 2u);
  ASSERT_EQ(tes->size(), 3u);
  EXPECT_EQ((*tes)[0].id, "m-te-0");
  EXPECT_EQ((*tes)[1].id, "m-te-1");
  EXPECT_EQ((*tes)[0].host_id, "host-a");  // found by its address's host
  ASSERT_EQ(a.starts.size(), 1u);          // only the missing one, under a fresh id
  EXPECT_EQ(a.starts[0].id, (*tes)[2].id);
  EXPECT_NE(a.starts[0].id, "m-te-0");
  EXPECT_NE(a.starts[0].id, "m-te-1");

  // At shutdown the adopted TEs are stopped through their host's agent like the started one.
  n->stop_all(std::chrono::milliseconds(100));
  EXPECT_EQ(net_->count(a.address(), "stop_te"), 3);
}

TEST_F(ClusterNodesTest, AnExpertParallelGangIsSpreadAndReplacedWholeWhenAMemberIsLost) {
  FakeAgent a(&store_, net_.get(), "host-a", 8, int64_t{16} << 30);
  FakeAgent b(&store_, net_.get(), "host-b", 2, int64_t{4} << 30);
  std::unique_ptr<ClusterNodes> n = nodes(1);
  cluster::StartTe t = te("m-te-0", "colocated", 1);
  t.engine.ep = 2;
  const ModelGangs g = model_gangs("m", 0, {t});
  ASSERT_EQ(g.gangs.size(), 1u);
  EXPECT_EQ(g.gangs[0].instance, "m-ep-0");
  EXPECT_EQ(g.index[0], (std::vector<size_t>{kNotATe, 0}));
  ASSERT_EQ(g.gangs[0].tes.size(), 2u);
  const cluster::StartTe& member = g.gangs[0].tes[0];
  EXPECT_EQ(member.id, "m-te-0-ep1");
  EXPECT_EQ(member.role, cluster::kEpExpertRole);
  EXPECT_EQ(member.engine.ep_member, 1);
  EXPECT_EQ(member.memory_bytes, int64_t{1} << 29);  // half the TE's reservation

  // host-a alone could hold both; spread, the member goes to host-b, first, and the TE is given
  // its address.
  Result<std::vector<RemoteTe>> started = n->start_gangs(*manager_, g.gangs);
  ASSERT_TRUE(started.ok()) << started.status().to_string();
  EXPECT_EQ(b.running(), (std::vector<std::string>{"m-te-0-ep1"}));
  EXPECT_EQ(a.running(), (std::vector<std::string>{"m-te-0"}));
  ASSERT_EQ(a.starts.size(), 1u);
  EXPECT_EQ(a.starts[0].engine.ep_remote, (std::vector<std::string>{(*started)[0].address}));

  GangWatch watch(n.get(), GangWatchConfig{.model = "m",
                                           .period = std::chrono::milliseconds(100),
                                           .max_unseen_checks = 2,
                                           .clock = &clock_,
                                           .background = false});
  watch.tick(*manager_);
  EXPECT_NE(watch.metrics_text().find("keel:gang_lost_total{model_name=\"m\"} 0"),
            std::string::npos);

  // The member exits: the TE is stopped at once and the gang placed again under new ids.
  b.exit("m-te-0-ep1");
  watch.tick(*manager_);  // within the period: not checked yet
  EXPECT_EQ(a.running(), (std::vector<std::string>{"m-te-0"}));
  clock_.advance_ns(200'000'000);
  watch.tick(*manager_);
  ASSERT_EQ(a.stops.size(), 1u);
  EXPECT_EQ(a.stops[0].id, "m-te-0");
  EXPECT_EQ(a.stops[0].grace_ms, 0);
  EXPECT_EQ(b.running(), (std::vector<std::string>{"m-te-0-ep1-r1"}));
  EXPECT_EQ(a.running(), (std::vector<std::string>{"m-te-0-r1"}));
  ASSERT_EQ(a.starts.size(), 2u);
  ASSERT_EQ(b.starts.size(), 2u);
  EXPECT_EQ(a.starts[1].engine.ep_remote.size(), 1u);
  EXPECT_EQ(a.starts[1].instance, "m-ep-0");
  const std::string metrics = watch.metrics_text();
  EXPECT_NE(metrics.find("keel:gang_lost_total{model_name=\"m\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("keel:gang_replaced_total{model_name=\"m\"} 1"), std::string::npos);

  // Stopping the TE on purpose stops its member too, and the gang is no longer watched.
  ASSERT_TRUE(n->stop_te("m-te-0-r1", std::chrono::milliseconds(100)).ok());
  EXPECT_TRUE(a.running().empty());
  EXPECT_TRUE(b.running().empty());
  EXPECT_TRUE(n->placed_gangs().empty());
  clock_.advance_ns(200'000'000);
  watch.tick(*manager_);
  EXPECT_EQ(a.starts.size(), 2u) << "a gang stopped on purpose is not replaced";
}

TEST_F(ClusterNodesTest, AGangAnotherManagerStoppedIsStoppedWholeAndNotReplaced) {
  FakeAgent a(&store_, net_.get(), "host-a", 8, int64_t{16} << 30);
  FakeAgent b(&store_, net_.get(), "host-b", 2, int64_t{4} << 30);
  std::unique_ptr<ClusterNodes> n = nodes(1);
  cluster::StartTe t = te("m-te-0", "colocated", 1);
  t.engine.ep = 2;
  ASSERT_TRUE(n->start_gangs(*manager_, model_gangs("m", 0, {t}).gangs).ok());
  GangWatch watch(n.get(), GangWatchConfig{.model = "m", .clock = &clock_, .background = false});
  watch.tick(*manager_);
  // A higher-priority manager evicts the TE through its agent (its own command, its own token).
  Result<Json> r =
      net_->call(a.address(), cluster::encode(cluster::StopTe{"m-te-0", 0, "other", 1}),
                 std::chrono::milliseconds(100));
  ASSERT_TRUE(r.ok() && cluster::decode_status_body(*r).ok());
  clock_.advance_ns(1'000'000'000);
  watch.tick(*manager_);
  EXPECT_TRUE(b.running().empty()) << "the member goes with its TE";
  EXPECT_EQ(a.starts.size(), 1u) << "an evicted gang is not placed again";
  EXPECT_TRUE(n->placed_gangs().empty());
  EXPECT_NE(watch.metrics_text().find("keel:gang_stopped_total{model_name=\"m\"} 1"),
            std::string::npos);
  EXPECT_NE(watch.metrics_text().find("keel:gang_replaced_total{model_name=\"m\"} 0"),
            std::string::npos);

  // A lone TE serves on its own: one that exits leaves through its lease, as before.
  ASSERT_TRUE(
      n->start_gangs(*manager_, model_gangs("m", 0, {te("m-te-1", "colocated", 1)}).gangs).ok());
  watch.tick(*manager_);
  a.exit("m-te-1");
  clock_.advance_ns(1'000'000'000);
  watch.tick(*manager_);
  EXPECT_EQ(a.starts.size(), 2u) << "a lone TE is not a gang the watch replaces";
}

TEST_F(ClusterNodesTest, StoppingOneTeOfAPairLeavesItsPeerButAMembersTeTakesItsMembers) {
  FakeAgent a(&store_, net_.get(), "host-a", 8, int64_t{16} << 30);
  FakeAgent b(&store_, net_.get(), "host-b", 8, int64_t{16} << 30);
  std::unique_ptr<ClusterNodes> n = nodes(1);
  ASSERT_TRUE(
      n->start_gangs(*manager_,
                     model_gangs("m", 0, {te("p", "prefill", 1), te("d", "decode", 1)}).gangs)
          .ok());
  ASSERT_TRUE(n->stop_te("p", std::chrono::milliseconds(100)).ok());  // a scale-in of prefill
  const auto all_running = [&] {
    std::vector<std::string> ids = a.running(), on_b = b.running();
    ids.insert(ids.end(), on_b.begin(), on_b.end());
    return ids;
  };
  EXPECT_EQ(all_running(), (std::vector<std::string>{"d"})) << "the decode TE serves on";

  cluster::StartTe t = te("m-te-0", "colocated", 1);
  t.engine.ep = 3;
  ASSERT_TRUE(n->start_gangs(*manager_, model_gangs("m", 0, {t}).gangs).ok());
  EXPECT_EQ(a.running().size() + b.running().size(), 4u);
  ASSERT_TRUE(n->stop_te("m-te-0", std::chrono::milliseconds(100)).ok());
  EXPECT_EQ(all_running(), (std::vector<std::string>{"d"})) << "the TE's members go with it";
}

}  // namespace
}  // namespace keel::control
