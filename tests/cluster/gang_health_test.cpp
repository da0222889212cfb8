// lost_processes: a placed gang's processes checked against what the hosts' agents list — a
// process seen and then missing is lost, one never seen yet gets a few checks, a host that is no
// longer listed loses everything it ran. Pure: no processes.
#include "cluster/policy/gang_health.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

std::vector<WatchedProcess> ep_gang() { return {{"m-te-0-ep1", "h2"}, {"m-te-0", "h1"}}; }

TEST(GangHealthTest, ProcessesListedByTheirHostsAreSeenAndNotLost) {
  std::vector<WatchedProcess> g = ep_gang();
  EXPECT_TRUE(lost_processes(g, {{"h1", {"m-te-0", "other"}}, {"h2", {"m-te-0-ep1"}}}, 3).empty());
  EXPECT_TRUE(g[0].seen);
  EXPECT_TRUE(g[1].seen);
}

TEST(GangHealthTest, AProcessSeenAndThenMissingIsLost) {
  std::vector<WatchedProcess> g = ep_gang();
  ASSERT_TRUE(lost_processes(g, {{"h1", {"m-te-0"}}, {"h2", {"m-te-0-ep1"}}}, 3).empty());
  EXPECT_EQ(lost_processes(g, {{"h1", {"m-te-0"}}, {"h2", {}}}, 3),
            (std::vector<std::string>{"m-te-0-ep1"}));
  // The leader gone, its member still listed: the leader is the one lost.
  g = ep_gang();
  ASSERT_TRUE(lost_processes(g, {{"h1", {"m-te-0"}}, {"h2", {"m-te-0-ep1"}}}, 3).empty());
  EXPECT_EQ(lost_processes(g, {{"h1", {}}, {"h2", {"m-te-0-ep1"}}}, 3),
            (std::vector<std::string>{"m-te-0"}));
}

TEST(GangHealthTest, AProcessNeverSeenGetsAFewChecksFirst) {
  // An agent publishes its list after it answered the start: a fresh process may not be listed.
  std::vector<WatchedProcess> g = ep_gang();
  const std::vector<HostProcesses> hosts = {{"h1", {"m-te-0"}}, {"h2", {}}};
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(lost_processes(g, hosts, 3).empty()) << i;
  EXPECT_EQ(g[0].unseen_checks, 3);
  EXPECT_EQ(lost_processes(g, hosts, 3), (std::vector<std::string>{"m-te-0-ep1"}));
  // Listed in time: the count starts again.
  g = ep_gang();
  (void)lost_processes(g, hosts, 3);
  EXPECT_TRUE(lost_processes(g, {{"h1", {"m-te-0"}}, {"h2", {"m-te-0-ep1"}}}, 3).empty());
  EXPECT_EQ(g[0].unseen_checks, 0);
}

TEST(GangHealthTest, AHostNoLongerListedLosesEverythingItRan) {
  std::vector<WatchedProcess> g = ep_gang();
  EXPECT_EQ(lost_processes(g, {{"h1", {"m-te-0"}}}, 3), (std::vector<std::string>{"m-te-0-ep1"}));
  g = ep_gang();
  EXPECT_EQ(lost_processes(g, {}, 3), (std::vector<std::string>{"m-te-0-ep1", "m-te-0"}));
}

}  // namespace
}  // namespace keel::cluster
