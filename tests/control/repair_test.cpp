// Repair (control/repair/te_replacer.h, je_replacer.h) with no process and no socket: the
// executors are fake processes, the JEs fake peers behind a FakeCaller, time a manual clock.
// Shown: a hung TE is killed, dropped from every JE, replaced under a fresh id and added to every
// JE, once, with its detection-to-ready time from the clock; a TE that exited is replaced without
// a kill; the fleet is read only every poll interval; the warm pool goes first and a failed bind
// falls back to a cold start; a replacement no JE takes is stopped again; a JE that exits is
// restarted at its own port with the TEs serving now, and a failed restart is retried after the
// retry interval, not before.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cluster/policy/je_replacement.h"
#include "cluster/protocol/fleet.h"
#include "cluster/protocol/messages.h"
#include "cluster/protocol/te_spec.h"
#include "control/fake_caller.h"
#include "control/repair/executor_processes.h"
#include "control/repair/je_replacer.h"
#include "control/repair/te_replacer.h"
#include "core/clock.h"

namespace keel::control {
namespace {

using cluster::Json;
using net::Message;
using namespace std::chrono_literals;

// Processes that start in `start_ns` of manual time (or fail while fail_spawns > 0).
class FakeProcesses final : public ExecutorProcesses {
 public:
  explicit FakeProcesses(ManualClock* clock) : clock_(clock) {}
  Result<proc::Child> spawn(const proc::ChildSpec& spec) override {
    spawned.push_back(spec);
    clock_->advance_ns(start_ns);
    if (fail_spawns > 0) {
      --fail_spawns;
      return Status::unavailable("address already in use");
    }
    return proc::Child{spec.name, next_pid++, Json{{"port", next_port++}}};
  }
  void kill(pid_t pid) override { killed.push_back(pid); }
  void stop(pid_t pid) override { stopped.push_back(pid); }

  int64_t start_ns = 1'500'000'000;
  int fail_spawns = 0;
  pid_t next_pid = 500;
  int next_port = 7100;
  std::vector<proc::ChildSpec> spawned;
  std::vector<pid_t> killed;
  std::vector<pid_t> stopped;

 private:
  ManualClock* clock_;
};

// A JE that answers remove_te and add_te (add_te refused while `refuse_adds`).
struct JeStub {
  JeStub(FakeCaller* net, const std::string& address) {
    net->serve(address, [this](const net::Message& m) -> Result<Json> {
      if (m.type == cluster::msg::kAddTe) {
        if (refuse_adds) return cluster::status_body(Status::unavailable("te not reachable"));
        added.push_back(m.body.value("address", ""));
        return cluster::status_body({});
      }
      KEEL_ASSIGN_OR_RETURN(cluster::RemoveTe r, cluster::decode_remove_te(m.body));
      removed.push_back(r);
      return cluster::status_body({});
    });
  }
  bool refuse_adds = false;
  std::vector<std::string> added;
  std::vector<cluster::RemoveTe> removed;
};

cluster::ManagedTe managed(const std::string& name, pid_t pid, const std::string& address) {
  cluster::ManagedTe te;
  te.name = name;
  te.pid = pid;
  te.address = address;
  te.keel_command = {"/bin/keel"};
  te.spec.id = name;
  te.spec.model_path = "/models/m.gguf";
  return te;
}

cluster::TeInfo listed(const std::string& id, const std::string& address,
                       cluster::health::TeState state) {
  cluster::TeInfo t;
  t.id = id;
  t.address = address;
  t.model = "m";
  t.state = state;
  t.healthy = state != cluster::health::TeState::kDead;
  return t;
}

class TeReplacerTest : public ::testing::Test {
 protected:
  std::unique_ptr<TeReplacer> replacer(
      std::function<int()> warm_idle = {},
      std::function<Result<cluster::ManagedTe>(cluster::TeRole)> warm_bind = {}) {
    TeReplacerConfig c;
    c.je_addresses = {"je-a:1", "je-b:1"};
    c.poll_interval = 200ms;
    c.fleet = [this]() -> Result<cluster::FleetSnapshot> {
      ++polls;
      return fleet;
    };
    c.warm_idle = std::move(warm_idle);
    c.warm_bind = std::move(warm_bind);
    c.caller = net;
    c.clock = &clock;
    Result<std::unique_ptr<TeReplacer>> r = TeReplacer::create(processes, std::move(c));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    (*r)->manage(managed("te-0", 100, "127.0.0.1:7000"));
    (*r)->manage(managed("te-1", 101, "127.0.0.1:7001"));
    (*r)->set_next_id(2);
    return std::move(*r);
  }

  ManualClock clock;
  std::shared_ptr<FakeCaller> net = std::make_shared<FakeCaller>();
  std::shared_ptr<FakeProcesses> processes = std::make_shared<FakeProcesses>(&clock);
  JeStub je_a{net.get(), "je-a:1"};
  JeStub je_b{net.get(), "je-b:1"};
  cluster::FleetSnapshot fleet;
  int polls = 0;
};

TEST_F(TeReplacerTest, AHungTeIsKilledDroppedReplacedAndAddedOnce) {
  fleet.tes = {listed("te-0", "127.0.0.1:7000", cluster::health::TeState::kHung),
               listed("te-1", "127.0.0.1:7001", cluster::health::TeState::kHealthy)};
  std::unique_ptr<TeReplacer> r = replacer();
  r->tick({});
  EXPECT_EQ(processes->killed, std::vector<pid_t>{100});
  for (const JeStub* je : {&je_a, &je_b}) {
    EXPECT_EQ(je->removed, (std::vector<cluster::RemoveTe>{{"127.0.0.1:7000", true}}));
    EXPECT_EQ(je->added, std::vector<std::string>{"127.0.0.1:7100"});
  }
  ASSERT_EQ(processes->spawned.size(), 1u);
  Result<cluster::TeSpec> spec = cluster::parse_te_spec(processes->spawned[0].stdin_bytes);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->id, "te-2");  // the same spec under a fresh id
  EXPECT_EQ(spec->model_path, "/models/m.gguf");
  EXPECT_EQ(r->live_addresses(), (std::vector<std::string>{"127.0.0.1:7001", "127.0.0.1:7100"}));
  const std::string m = r->metrics_text();
  EXPECT_NE(m.find("keel:cluster_te_hung_total 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("keel:cluster_te_replaced_total 1\n"), std::string::npos) << m;
  // Detection to ready: the start's 1.5 s of clock, in the 2 s bucket and not the 1 s one.
  EXPECT_NE(m.find("keel:cluster_te_replacement_seconds_bucket{le=\"1\"} 0"), std::string::npos)
      << m;
  EXPECT_NE(m.find("keel:cluster_te_replacement_seconds_bucket{le=\"2\"} 1"), std::string::npos)
      << m;

  // Still listed as hung at the next poll: not replaced a second time.
  clock.advance_ns(int64_t{1} << 30);
  r->tick({});
  EXPECT_EQ(processes->spawned.size(), 1u);
  EXPECT_EQ(processes->killed.size(), 1u);
}

TEST_F(TeReplacerTest, AnExitedTeIsReplacedWithoutAKillAndTheFleetIsReadEveryPollInterval) {
  fleet.tes = {listed("te-0", "127.0.0.1:7000", cluster::health::TeState::kHealthy),
               listed("te-1", "127.0.0.1:7001", cluster::health::TeState::kHealthy)};
  processes->start_ns = 0;
  std::unique_ptr<TeReplacer> r = replacer();
  r->tick({});
  EXPECT_EQ(polls, 1);
  clock.advance_ns(100'000'000);  // 100 ms: not yet
  r->tick({});
  EXPECT_EQ(polls, 1);
  clock.advance_ns(100'000'000);  // 200 ms
  r->tick({});
  EXPECT_EQ(polls, 2);

  proc::ChildExit exit;
  exit.name = "te-1";
  exit.pid = 101;
  r->tick({exit});
  EXPECT_TRUE(processes->killed.empty());
  ASSERT_EQ(processes->spawned.size(), 1u);
  EXPECT_NE(r->metrics_text().find("keel:cluster_te_dead_total 1\n"), std::string::npos);
  EXPECT_EQ(je_a.removed, (std::vector<cluster::RemoveTe>{{"127.0.0.1:7001", true}}));
}

TEST_F(TeReplacerTest, TheWarmPoolGoesFirstAndAFailedBindFallsBackToAColdStart) {
  fleet.tes = {listed("te-0", "127.0.0.1:7000", cluster::health::TeState::kDead),
               listed("te-1", "127.0.0.1:7001", cluster::health::TeState::kDead)};
  int binds = 0;
  std::unique_ptr<TeReplacer> r = replacer([] { return 2; },
                                           [&](cluster::TeRole) -> Result<cluster::ManagedTe> {
                                             if (++binds == 2)
                                               return Status::unavailable("bind failed");
                                             cluster::ManagedTe te;
                                             te.name = "warm-te-0";
                                             te.pid = 300;
                                             te.address = "127.0.0.1:7300";
                                             return te;
                                           });
  r->tick({});
  EXPECT_EQ(binds, 2);
  ASSERT_EQ(processes->spawned.size(), 1u);  // the second, after its bind failed
  EXPECT_EQ(r->live_addresses(), (std::vector<std::string>{"127.0.0.1:7300", "127.0.0.1:7100"}));
  EXPECT_NE(r->metrics_text().find("keel:cluster_te_replaced_total 2\n"), std::string::npos);
}

TEST_F(TeReplacerTest, AReplacementNoJeTakesIsStoppedAndCountedFailed) {
  fleet.tes = {listed("te-0", "127.0.0.1:7000", cluster::health::TeState::kHung)};
  je_b.refuse_adds = true;
  std::unique_ptr<TeReplacer> r = replacer();
  r->tick({});
  ASSERT_EQ(processes->spawned.size(), 1u);
  EXPECT_EQ(processes->stopped, std::vector<pid_t>{500});
  const std::string m = r->metrics_text();
  EXPECT_NE(m.find("keel:cluster_te_replace_failed_total 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("keel:cluster_te_replaced_total 0\n"), std::string::npos) << m;
}

TEST(JeReplacerTest, AnExitedJeRestartsAtItsPortWithTheServingTesAndRetriesAfterTheInterval) {
  ManualClock clock;
  auto processes = std::make_shared<FakeProcesses>(&clock);
  processes->start_ns = 0;
  processes->fail_spawns = 1;  // the first restart finds the port still taken
  cluster::FleetSnapshot fleet;
  fleet.tes = {listed("te-0", "127.0.0.1:7000", cluster::health::TeState::kHealthy),
               listed("te-1", "127.0.0.1:7001", cluster::health::TeState::kDead)};
  JeReplacerConfig c;
  c.retry_interval = 1000ms;
  c.te_connect_timeout = 700ms;
  c.fleet = [&]() -> Result<cluster::FleetSnapshot> { return fleet; };
  c.known_tes = [] { return std::vector<std::string>{"127.0.0.1:7200"}; };  // started since
  c.clock = &clock;
  Result<std::unique_ptr<JeReplacer>> r = JeReplacer::create(processes, std::move(c));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  cluster::ManagedJe je;
  je.name = "je-0";
  je.address = "127.0.0.1:7500";
  je.pid = 42;
  je.keel_command = {"/bin/keel"};
  je.spec.id = "je-0";
  je.spec.port = 7500;
  je.spec.model_path = "/models/m.gguf";
  je.spec.tes = {"127.0.0.1:7000", "127.0.0.1:7001"};
  (*r)->manage(je);

  proc::ChildExit exit;
  exit.name = "je-0";
  exit.pid = 42;
  (*r)->tick({exit});
  ASSERT_EQ(processes->spawned.size(), 1u);  // tried at once, failed
  EXPECT_NE((*r)->metrics_text().find("keel:cluster_je_replace_failed_total 1\n"),
            std::string::npos);
  clock.advance_ns(999'000'000);
  (*r)->tick({});
  EXPECT_EQ(processes->spawned.size(), 1u);  // not before the retry interval
  clock.advance_ns(1'000'000);
  (*r)->tick({});
  ASSERT_EQ(processes->spawned.size(), 2u);
  Result<cluster::JeSpec> spec = cluster::parse_je_spec(processes->spawned[1].stdin_bytes);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->port, 7500);
  EXPECT_EQ(spec->tes, (std::vector<std::string>{"127.0.0.1:7000", "127.0.0.1:7200"}));
  EXPECT_EQ(spec->te_connect_timeout_ms, 700);
  const std::string m = (*r)->metrics_text();
  EXPECT_NE(m.find("keel:cluster_je_dead_total 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("keel:cluster_je_replaced_total 1\n"), std::string::npos) << m;
  // Exit seen to ready: the retry's 1 s of clock.
  EXPECT_NE(m.find("keel:cluster_je_replacement_seconds_bucket{le=\"0.5\"} 0"), std::string::npos)
      << m;
  EXPECT_NE(m.find("keel:cluster_je_replacement_seconds_bucket{le=\"1\"} 1"), std::string::npos)
      << m;
}

}  // namespace
}  // namespace keel::control
