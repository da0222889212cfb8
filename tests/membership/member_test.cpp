// Member keys and the value codec, base64 as the etcd gateway needs it, the watch-line parser,
// etcd endpoint parsing, and the embedded store's lease expiry on a manual clock: pure, no
// processes.
#include <gtest/gtest.h>

#include "membership/base64.h"
#include "membership/embedded_store.h"
#include "membership/etcd_client.h"
#include "membership/etcd_watch.h"
#include "membership/member.h"

namespace keel::membership {
namespace {

TEST(MemberTest, KeysAndCodecRoundTrip) {
  const Member m{MemberKind::kJobExecutor, "je-1", "10.0.0.2:7001", {{"model", "m"}}};
  EXPECT_EQ(member_key("/keel/c1", m.kind, m.id), "/keel/c1/members/je/je-1");
  EXPECT_EQ(election_key("/keel/c1", "manager"), "/keel/c1/election/manager");
  Result<Member> back = decode_member(encode_member(m));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, m);
  Result<Member> from_key = member_from_key("/keel/c1", "/keel/c1/members/je/je-1");
  ASSERT_TRUE(from_key.ok());
  EXPECT_EQ(from_key->kind, MemberKind::kJobExecutor);
  EXPECT_EQ(from_key->id, "je-1");
}

TEST(MemberTest, BadInputIsAPreciseError) {
  EXPECT_FALSE(decode_member("not json").ok());
  EXPECT_FALSE(decode_member(R"({"kind":"robot","id":"x","address":"a"})").ok());
  EXPECT_FALSE(decode_member(R"({"kind":"te","id":"x","address":"a","attributes":{"n":1}})").ok());
  EXPECT_FALSE(member_from_key("/keel/c1", "/other/members/te/x").ok());
  EXPECT_FALSE(validate_prefix("keel").ok());
  EXPECT_FALSE(validate_prefix("/keel/").ok());
  EXPECT_TRUE(validate_prefix("/keel").ok());
  EXPECT_FALSE(validate_name("id", "").ok());
  EXPECT_FALSE(validate_name("id", "a b").ok());
}

TEST(Base64Test, RoundTripsEveryLengthAndRejectsGarbage) {
  std::string bytes;
  for (int n = 0; n < 40; ++n) {
    Result<std::string> back = base64_decode(base64_encode(bytes));
    ASSERT_TRUE(back.ok()) << n;
    EXPECT_EQ(*back, bytes);
    bytes.push_back(static_cast<char>(n * 37 + 200));
  }
  EXPECT_EQ(base64_encode("/keel/"), "L2tlZWwv");
  EXPECT_EQ(base64_encode("ab"), "YWI=");
  EXPECT_FALSE(base64_decode("YWI").ok());
  EXPECT_FALSE(base64_decode("Y!I=").ok());
  EXPECT_FALSE(base64_decode("YW=I").ok());
}

TEST(EtcdClientTest, EndpointsAndPrefixRange) {
  Result<EtcdEndpoint> e = parse_etcd_endpoint("http://127.0.0.1:2379");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, "2379");
  for (const char* bad : {"https://h:1", "h:1", "http://h", "http://h:x", "http://h:99999",
                          "http://:1", "http://h:1/v3"}) {
    EXPECT_FALSE(parse_etcd_endpoint(bad).ok()) << bad;
  }
  EXPECT_FALSE(parse_etcd_endpoints({}).ok());
  EXPECT_EQ(prefix_range_end("/a/"), "/a0");
  EXPECT_EQ(prefix_range_end(std::string("a\xff", 2)), "b");
}

TEST(EtcdClientTest, DeadEtcdFailsFastWithTheEndpointNamed) {
  EtcdClientConfig c;
  c.endpoints = {"http://127.0.0.1:1"};  // nothing listens on port 1
  c.attempts = 3;
  Result<EtcdClient> client = EtcdClient::create(c);
  ASSERT_TRUE(client.ok());
  Result<nlohmann::json> r = client->call("/v3/kv/range", {{"key", "YQ=="}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("127.0.0.1:1 unreachable (3 tries)"), std::string::npos)
      << r.status().to_string();
}

TEST(EtcdWatchTest, ParsesPutsAndDeletes) {
  const std::string prefix = "/k";
  const Member m{MemberKind::kTaskExecutor, "te-0", "h:1", {}};
  const std::string put = R"({"result":{"events":[{"kv":{"key":")" +
                          base64_encode(member_key(prefix, m.kind, m.id)) +
                          R"(","mod_revision":"7","value":")" + base64_encode(encode_member(m)) +
                          R"("}},)" + R"({"type":"DELETE","kv":{"key":")" +
                          base64_encode("/k/members/je/je-2") + R"(","mod_revision":"9"}}]}})";
  int64_t last = 3;
  std::vector<MemberEvent> events = parse_watch_line(prefix, put, &last);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, MemberEventType::kAdded);
  EXPECT_EQ(events[0].member, m);
  EXPECT_EQ(events[1].type, MemberEventType::kRemoved);
  EXPECT_EQ(events[1].member.kind, MemberKind::kJobExecutor);
  EXPECT_EQ(events[1].member.id, "je-2");
  EXPECT_EQ(last, 9);
  EXPECT_TRUE(parse_watch_line(prefix, R"({"result":{"created":true}})", &last).empty());
  EXPECT_TRUE(parse_watch_line(prefix, "garbage", &last).empty());
}

TEST(EmbeddedStoreTest, LeaseExpiryOnAManualClock) {
  ManualClock clock;
  EmbeddedStore store(&clock);
  const int64_t a = store.grant(3);
  const int64_t b = store.grant(3);
  ASSERT_TRUE(store.put("/p/x", "1", a).ok());
  ASSERT_TRUE(store.put("/p/y", "2", b).ok());
  EXPECT_TRUE(*store.put_if_absent("/e", "a", a));
  EXPECT_FALSE(*store.put_if_absent("/e", "b", b));
  clock.advance_ns(2'000'000'000);
  ASSERT_TRUE(store.keepalive(b).ok());  // b lives to t = 5 s, a dies at t = 3 s
  clock.advance_ns(1'500'000'000);
  EXPECT_EQ(store.range("/p/").size(), 1u);
  EXPECT_FALSE(store.get("/e").has_value());
  EXPECT_EQ(store.keepalive(a).code(), StatusCode::kNotFound);
  EXPECT_EQ(store.put("/p/z", "3", a).code(), StatusCode::kNotFound);
  EXPECT_TRUE(*store.put_if_absent("/e", "b", b));
  store.revoke(b);
  EXPECT_TRUE(store.range("/").empty());
}

}  // namespace
}  // namespace keel::membership
