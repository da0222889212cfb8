// The behavioural contract every Membership implementation keeps, run as one typed suite over the
// embedded store and a private etcd (tests/support/etcd_server.h; skipped with the reason when no
// etcd binary is installed, failed under CI=true): register and list, watch added/removed, close
// removing at once, lease expiry removing a member whose keepalive stopped (TTL 2 s), and leader
// election — one leader among two candidates, resign hands over, and the standby leads within
// TTL + 1 s (+ 1 s slack for a loaded machine) after the leader's keepalive stops.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/clock.h"
#include "membership/campaign.h"
#include "membership/embedded_membership.h"
#include "membership/etcd_membership.h"
#include "support/etcd_server.h"

namespace keel::membership {
namespace {

using namespace std::chrono_literals;
using testing::EtcdServer;

constexpr int kTtlS = 2;

struct EmbeddedBackend {
  static void start_suite() {}
  static void stop_suite() {}
  SteadyClock clock;
  EmbeddedStore store{&clock};
  Result<std::unique_ptr<Membership>> open(const MembershipConfig& c) {
    KEEL_ASSIGN_OR_RETURN(auto m, EmbeddedMembership::open(&store, c));
    return std::unique_ptr<Membership>(std::move(m));
  }
};

struct EtcdBackend {
  static inline std::unique_ptr<EtcdServer> server;
  static inline std::string start_error;
  static void start_suite() {
    if (!EtcdServer::find_binary().empty()) server = EtcdServer::start(&start_error);
  }
  static void stop_suite() { server.reset(); }
  Result<std::unique_ptr<Membership>> open(const MembershipConfig& c) {
    EtcdClientConfig ec;
    ec.endpoints = {server->endpoint()};
    KEEL_ASSIGN_OR_RETURN(auto m, EtcdMembership::open(ec, c));
    return std::unique_ptr<Membership>(std::move(m));
  }
};

template <typename Backend>
class MembershipContractTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { Backend::start_suite(); }
  static void TearDownTestSuite() { Backend::stop_suite(); }

  void SetUp() override {
    if constexpr (std::is_same_v<Backend, EtcdBackend>) {
      KEEL_REQUIRE_ETCD();
      ASSERT_NE(EtcdBackend::server, nullptr) << EtcdBackend::start_error;
    }
  }

  // A session under a prefix private to this test.
  std::unique_ptr<Membership> session() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    MembershipConfig c;
    c.prefix = std::string("/keel-test/") + info->name();
    c.ttl_s = kTtlS;
    Result<std::unique_ptr<Membership>> m = backend_.open(c);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? std::move(*m) : nullptr;
  }

  static Member member(MemberKind kind, const std::string& id, const std::string& address) {
    return {kind, id, address, {{"model", "stories"}, {"pid", "42"}}};
  }

  static std::vector<std::string> ids(Membership& m) {
    Result<std::vector<Member>> list = m.list();
    EXPECT_TRUE(list.ok()) << list.status().to_string();
    std::vector<std::string> out;
    if (list.ok()) {
      for (const Member& x : *list)
        out.push_back(std::string(member_kind_name(x.kind)) + ":" + x.id);
    }
    return out;
  }

  Backend backend_;
};

using Backends = ::testing::Types<EmbeddedBackend, EtcdBackend>;
class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, EmbeddedBackend> ? "Embedded" : "Etcd";
  }
};
TYPED_TEST_SUITE(MembershipContractTest, Backends, BackendNames);

TYPED_TEST(MembershipContractTest, RegisterListDeregister) {
  auto a = this->session();
  auto b = this->session();
  ASSERT_TRUE(a && b);
  const Member gw = this->member(MemberKind::kGateway, "gw-0", "127.0.0.1:8000");
  ASSERT_TRUE(a->register_member(gw).ok());
  ASSERT_TRUE(b->register_member(this->member(MemberKind::kTaskExecutor, "te-0", "h:1")).ok());
  ASSERT_TRUE(b->register_member(this->member(MemberKind::kJobExecutor, "je-0", "h:2")).ok());
  EXPECT_EQ(this->ids(*a), (std::vector<std::string>{"gateway:gw-0", "je:je-0", "te:te-0"}));
  Result<std::vector<Member>> list = b->list();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->front(), gw);  // attributes and address round-trip
  // Only the owner's deregistration counts.
  ASSERT_TRUE(a->deregister_member(MemberKind::kTaskExecutor, "te-0").ok());
  EXPECT_EQ(this->ids(*a).size(), 3u);
  ASSERT_TRUE(b->deregister_member(MemberKind::kTaskExecutor, "te-0").ok());
  EXPECT_EQ(this->ids(*a), (std::vector<std::string>{"gateway:gw-0", "je:je-0"}));
  EXPECT_FALSE(a->register_member(this->member(MemberKind::kGateway, "bad/id", "h:3")).ok());
}

TYPED_TEST(MembershipContractTest, WatchSeesAddsAndRemoves) {
  auto watcher = this->session();
  auto a = this->session();
  ASSERT_TRUE(watcher && a);
  ASSERT_TRUE(a->register_member(this->member(MemberKind::kTaskExecutor, "te-old", "h:1")).ok());
  Result<std::unique_ptr<MemberWatch>> w = watcher->watch();
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_TRUE(a->register_member(this->member(MemberKind::kTaskExecutor, "te-1", "h:2")).ok());
  ASSERT_TRUE(a->deregister_member(MemberKind::kTaskExecutor, "te-1").ok());
  std::optional<MemberEvent> e = (*w)->next(5s);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->type, MemberEventType::kAdded);
  EXPECT_EQ(e->member.id, "te-1");  // not te-old: registered before the watch began
  EXPECT_EQ(e->member.address, "h:2");
  e = (*w)->next(5s);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->type, MemberEventType::kRemoved);
  EXPECT_EQ(e->member.id, "te-1");
  EXPECT_EQ(e->member.kind, MemberKind::kTaskExecutor);
  // Closing a session removes its members at once.
  ASSERT_TRUE(a->close().ok());
  e = (*w)->next(5s);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->type, MemberEventType::kRemoved);
  EXPECT_EQ(e->member.id, "te-old");
  EXPECT_TRUE(this->ids(*watcher).empty());
}

TYPED_TEST(MembershipContractTest, StoppedKeepaliveExpiresMember) {
  auto watcher = this->session();
  auto a = this->session();
  ASSERT_TRUE(watcher && a);
  ASSERT_TRUE(a->register_member(this->member(MemberKind::kTaskExecutor, "te-0", "h:1")).ok());
  // Kept alive past its TTL while the keepalive runs.
  std::this_thread::sleep_for(std::chrono::seconds(kTtlS) + 500ms);
  EXPECT_EQ(this->ids(*watcher), std::vector<std::string>{"te:te-0"});
  EXPECT_TRUE(a->lease_alive());
  Result<std::unique_ptr<MemberWatch>> w = watcher->watch();
  ASSERT_TRUE(w.ok());
  const auto stopped = std::chrono::steady_clock::now();
  a->stop_keepalive();
  std::optional<MemberEvent> e = (*w)->next(std::chrono::seconds(kTtlS + 2));
  ASSERT_TRUE(e.has_value()) << "no removal within TTL + 2 s";
  EXPECT_EQ(e->type, MemberEventType::kRemoved);
  EXPECT_EQ(e->member.id, "te-0");
  EXPECT_LE(std::chrono::steady_clock::now() - stopped, std::chrono::seconds(kTtlS + 2));
  EXPECT_TRUE(this->ids(*watcher).empty());
}

TYPED_TEST(MembershipContractTest, OneLeaderAndResignHandsOver) {
  auto a = this->session();
  auto b = this->session();
  ASSERT_TRUE(a && b);
  Result<std::optional<std::string>> none = a->leader("manager");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  Result<bool> won = a->try_lead("manager", "mgr-a");
  ASSERT_TRUE(won.ok()) << won.status().to_string();
  EXPECT_TRUE(*won);
  EXPECT_TRUE(*a->try_lead("manager", "mgr-a"));  // already held: still true
  Result<bool> lost = b->try_lead("manager", "mgr-b");
  ASSERT_TRUE(lost.ok());
  EXPECT_FALSE(*lost);
  EXPECT_EQ(b->leader("manager")->value_or(""), "mgr-a");
  ASSERT_TRUE(b->resign("manager").ok());  // not b's to give up
  EXPECT_EQ(a->leader("manager")->value_or(""), "mgr-a");
  ASSERT_TRUE(a->resign("manager").ok());
  ASSERT_TRUE(campaign(*b, "manager", "mgr-b", {.poll = 50ms, .timeout = 5s}).ok());
  EXPECT_EQ(a->leader("manager")->value_or(""), "mgr-b");
}

TYPED_TEST(MembershipContractTest, EachNewLeadershipHasAHigherFencingToken) {
  auto a = this->session();
  auto b = this->session();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->leadership_token("manager").status().code(), StatusCode::kFailedPrecondition)
      << "nobody leads yet";
  ASSERT_TRUE(*a->try_lead("manager", "mgr-a"));
  Result<int64_t> first = a->leadership_token("manager");
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_GT(*first, 0);
  ASSERT_TRUE(a->register_member({MemberKind::kTaskExecutor, "te-0", "127.0.0.1:1", {}}).ok());
  EXPECT_EQ(*a->leadership_token("manager"), *first) << "the same leadership keeps its token";
  EXPECT_EQ(b->leadership_token("manager").status().code(), StatusCode::kFailedPrecondition)
      << "a standby has no token";
  ASSERT_TRUE(a->resign("manager").ok());
  EXPECT_FALSE(a->leadership_token("manager").ok()) << "resigned";
  ASSERT_TRUE(*b->try_lead("manager", "mgr-b"));
  Result<int64_t> second = b->leadership_token("manager");
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_GT(*second, *first) << "the successor's token is higher";
  ASSERT_TRUE(b->resign("manager").ok());
  ASSERT_TRUE(*a->try_lead("manager", "mgr-a"));
  EXPECT_GT(*a->leadership_token("manager"), *second) << "leading again is a new leadership";
}

TYPED_TEST(MembershipContractTest, StandbyLeadsWithinTtlAfterLeaderDies) {
  auto a = this->session();
  auto b = this->session();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(campaign(*a, "manager", "mgr-a", {.poll = 50ms, .timeout = 5s}).ok());
  EXPECT_EQ(campaign(*b, "manager", "mgr-b", {.poll = 50ms, .timeout = 300ms}).code(),
            StatusCode::kUnavailable);  // a standby while a leads
  const auto died = std::chrono::steady_clock::now();
  a->stop_keepalive();                                      // the leader "dies": its lease runs out
  const auto bound = std::chrono::seconds(kTtlS + 1) + 1s;  // TTL + 1 s, + 1 s slack
  const Status s = campaign(*b, "manager", "mgr-b", {.poll = 50ms, .timeout = bound});
  ASSERT_TRUE(s.ok()) << s.to_string();
  const auto took = std::chrono::steady_clock::now() - died;
  EXPECT_LE(took, bound);
  EXPECT_EQ(b->leader("manager")->value_or(""), "mgr-b");
  std::printf("standby led %.2f s after the leader's keepalive stopped (TTL %d s)\n",
              std::chrono::duration<double>(took).count(), kTtlS);
}

}  // namespace
}  // namespace keel::membership
