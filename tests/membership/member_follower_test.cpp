// MemberFollower over the embedded store (no etcd, no processes): the members live at start are
// reported, later registrations and removals (deregister, a session closed) are reported once with
// the address the member had, other kinds and filtered-out members are ignored, and a member
// re-registered at a new address is reported removed then added.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "core/clock.h"
#include "membership/embedded_membership.h"
#include "membership/member_follower.h"

namespace keel::membership {
namespace {

using namespace std::chrono_literals;

struct Seen {
  std::mutex mu;
  std::vector<std::string> events;  // "+id@address" / "-id@address"
  void add(char sign, const Member& m) {
    std::lock_guard lock(mu);
    events.push_back(std::string(1, sign) + m.id + "@" + m.address);
  }
  // Waits (bounded) until `n` events were seen; returns them.
  std::vector<std::string> wait_for(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mu);
        if (events.size() >= n) return events;
      }
      std::this_thread::sleep_for(10ms);
    }
    std::lock_guard lock(mu);
    return events;
  }
};

class MemberFollowerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Membership> session() {
    MembershipConfig c;
    c.prefix = "/keel-test/follower";
    c.ttl_s = 10;
    Result<std::unique_ptr<EmbeddedMembership>> m = EmbeddedMembership::open(&store_, c);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? std::move(*m) : nullptr;
  }
  static Member te(const std::string& id, const std::string& address, const std::string& model) {
    return {MemberKind::kTaskExecutor, id, address, {{"model", model}}};
  }
  SteadyClock clock_;
  EmbeddedStore store_{&clock_};
};

TEST_F(MemberFollowerTest, ReportsLiveThenChangesOnce) {
  auto te_host = session();
  auto je = session();
  ASSERT_TRUE(te_host && je);
  ASSERT_TRUE(te_host->register_member(te("te-0", "10.0.0.2:1", "m")).ok());
  ASSERT_TRUE(te_host->register_member(te("te-x", "10.0.0.2:9", "other")).ok());
  ASSERT_TRUE(
      te_host->register_member({MemberKind::kJobExecutor, "je-0", "10.0.0.1:5", {{"model", "m"}}})
          .ok());
  Seen seen;
  auto f = MemberFollower::start(
      je.get(), MemberKind::kTaskExecutor,
      [](const Member& m) {
        auto it = m.attributes.find("model");
        return it != m.attributes.end() && it->second == "m";
      },
      {[&](const Member& m) { seen.add('+', m); }, [&](const Member& m) { seen.add('-', m); }});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(seen.wait_for(1), std::vector<std::string>{"+te-0@10.0.0.2:1"});

  ASSERT_TRUE(te_host->register_member(te("te-1", "10.0.0.3:1", "m")).ok());
  ASSERT_TRUE(te_host->register_member(te("te-1", "10.0.0.3:1", "m")).ok());  // a refresh
  ASSERT_TRUE(te_host->register_member(te("te-y", "10.0.0.3:7", "other")).ok());
  ASSERT_TRUE(te_host->deregister_member(MemberKind::kTaskExecutor, "te-0").ok());
  ASSERT_TRUE(te_host->register_member(te("te-1", "10.0.0.3:2", "m")).ok());  // moved
  const std::vector<std::string> want = {"+te-0@10.0.0.2:1", "+te-1@10.0.0.3:1", "-te-0@10.0.0.2:1",
                                         "-te-1@10.0.0.3:1", "+te-1@10.0.0.3:2"};
  EXPECT_EQ(seen.wait_for(want.size()), want);
  ASSERT_EQ((*f)->members().size(), 1u);
  EXPECT_EQ((*f)->members()[0].address, "10.0.0.3:2");

  ASSERT_TRUE(te_host->close().ok());  // the TE host's lease goes: te-1 (and te-y) vanish
  std::vector<std::string> after = seen.wait_for(want.size() + 1);
  ASSERT_EQ(after.size(), want.size() + 1);
  EXPECT_EQ(after.back(), "-te-1@10.0.0.3:2");
  EXPECT_TRUE((*f)->members().empty());
  (*f)->stop();
}

TEST_F(MemberFollowerTest, NoFilterFollowsEveryMemberOfTheKind) {
  auto a = session();
  ASSERT_TRUE(a);
  Seen seen;
  auto f = MemberFollower::start(a.get(), MemberKind::kNode, nullptr,
                                 {[&](const Member& m) { seen.add('+', m); }, nullptr});
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(a->register_member({MemberKind::kNode, "h2", "10.0.0.2:9000", {}}).ok());
  ASSERT_TRUE(a->register_member(te("te-0", "10.0.0.2:1", "m")).ok());
  ASSERT_TRUE(a->register_member({MemberKind::kNode, "h3", "10.0.0.3:9000", {}}).ok());
  const std::vector<std::string> want = {"+h2@10.0.0.2:9000", "+h3@10.0.0.3:9000"};
  EXPECT_EQ(seen.wait_for(2), want);
}

}  // namespace
}  // namespace keel::membership
