// ShmChannel: a request and its reply between two threads through one shared object, the name
// gone once unlinked, a wait that times out, and a wait ended by a peer that is gone.
#include "ep/shm_channel.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

namespace keel::ep {
namespace {

using std::chrono::milliseconds;

TEST(ShmChannelTest, RequestAndReplyCrossTheSharedObject) {
  auto leader = ShmChannel::create(4096, 8192);
  ASSERT_TRUE(leader.ok()) << leader.status().to_string();
  auto member = ShmChannel::attach((*leader)->name());
  ASSERT_TRUE(member.ok()) << member.status().to_string();
  (*leader)->unlink();
  EXPECT_EQ(ShmChannel::attach((*leader)->name()).status().code(), StatusCode::kNotFound);
  EXPECT_GE((*member)->reply().size(), 8192u);

  std::thread t([&] {
    for (uint32_t seen = 0; seen < 100;) {
      auto next = (*member)->wait_request(seen, milliseconds(5000), {});
      ASSERT_TRUE(next.ok());
      seen = *next;
      uint32_t v = 0;
      std::memcpy(&v, (*member)->request().data(), 4);
      v *= 2;
      std::memcpy((*member)->reply().data(), &v, 4);
      (*member)->post_reply();
    }
  });
  for (uint32_t i = 1; i <= 100; ++i) {
    std::memcpy((*leader)->request().data(), &i, 4);
    (*leader)->post_request();
    auto r = (*leader)->wait_reply(i - 1, milliseconds(5000), {});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(*r, i);
    uint32_t v = 0;
    std::memcpy(&v, (*leader)->reply().data(), 4);
    EXPECT_EQ(v, 2 * i);
  }
  t.join();
}

TEST(ShmChannelTest, WaitsEndOnTimeoutAndOnAGonePeer) {
  auto ch = ShmChannel::create(4096, 4096);
  ASSERT_TRUE(ch.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto r = (*ch)->wait_reply(0, milliseconds(120), {});
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(120));
  r = (*ch)->wait_reply(0, milliseconds(60000), [] { return false; });
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("gone"), std::string::npos);
}

TEST(ShmChannelTest, AttachRefusesWhatIsNotAChannel) {
  EXPECT_EQ(ShmChannel::attach("/keel-ep-no-such-channel").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace keel::ep
