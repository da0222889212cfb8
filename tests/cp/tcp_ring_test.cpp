// TcpRing over loopback, its members as threads: the rendezvous connects 1, 2 and 3 members;
// messages arrive in order and intact, large ones included; a member gone ends its neighbours'
// waits with Unavailable; a join of the wrong group size is refused; a member 0 nobody joins
// gives up at the deadline.
#include "cp/tcp_ring.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace keel::cp {
namespace {

using namespace std::chrono_literals;

model::CpMessage message(size_t n, uint8_t seed) {
  auto m = std::make_shared<std::vector<std::byte>>(n);
  for (size_t i = 0; i < n; ++i) (*m)[i] = std::byte(static_cast<uint8_t>(i * 7 + seed));
  return m;
}

// Starts `n` members on threads; returns their rings (null where connect failed).
std::vector<std::unique_ptr<TcpRing>> start_group(int n, std::chrono::milliseconds timeout = 10s,
                                                  int claimed_size = 0) {
  std::promise<uint16_t> port0;
  auto port = port0.get_future().share();
  std::vector<std::unique_ptr<TcpRing>> rings(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      TcpRingOptions o;
      o.rank = r;
      o.size = (r == n - 1 && claimed_size > 0) ? claimed_size : n;
      o.timeout = timeout;
      if (r > 0) o.join = "127.0.0.1:" + std::to_string(port.get());
      auto ring = TcpRing::connect(o, [&](uint16_t p) {
        if (r == 0) port0.set_value(p);
      });
      if (ring.ok()) rings[static_cast<size_t>(r)] = std::move(*ring);
    });
  }
  for (auto& t : threads) t.join();
  return rings;
}

TEST(TcpRingTest, MessagesGoAroundTheRingInOrderAndIntact) {
  for (int n : {1, 2, 3}) {
    auto rings = start_group(n);
    for (auto& r : rings) ASSERT_NE(r, nullptr) << n;
    if (n == 1) continue;
    // Each member sends three messages (one of 8 MiB), then reads three from its previous one.
    for (int r = 0; r < n; ++r) {
      for (int k = 0; k < 3; ++k) {
        const size_t size = k == 1 ? (size_t{8} << 20) : 100 + static_cast<size_t>(r);
        ASSERT_TRUE(
            rings[static_cast<size_t>(r)]->send_next(message(size, uint8_t(r * 10 + k))).ok());
      }
    }
    for (int r = 0; r < n; ++r) {
      const int from = (r + n - 1) % n;
      for (int k = 0; k < 3; ++k) {
        auto got = rings[static_cast<size_t>(r)]->recv_prev();
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        const size_t size = k == 1 ? (size_t{8} << 20) : 100 + static_cast<size_t>(from);
        EXPECT_EQ(**got, *message(size, uint8_t(from * 10 + k))) << n << " " << r << " " << k;
      }
      EXPECT_TRUE(rings[static_cast<size_t>(r)]->flush().ok());
    }
  }
}

TEST(TcpRingTest, AMemberGoneEndsItsNeighboursWaits) {
  auto rings = start_group(3);
  for (auto& r : rings) ASSERT_NE(r, nullptr);
  rings[1].reset();  // member 1 exits
  auto got = rings[2]->recv_prev();
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().to_string();
  // Member 0 writes to the member that is gone: the send or the flush fails.
  Status st = rings[0]->send_next(message(1 << 20, 1));
  for (int i = 0; i < 50 && st.ok(); ++i) st = rings[0]->send_next(message(1 << 20, 1));
  if (st.ok()) st = rings[0]->flush();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
}

TEST(TcpRingTest, AJoinOfAnotherGroupSizeIsRefused) {
  auto rings = start_group(2, 3s, /*claimed_size=*/3);
  EXPECT_EQ(rings[0], nullptr);
  EXPECT_EQ(rings[1], nullptr);
}

TEST(TcpRingTest, StartUpGivesUpAtTheDeadline) {
  TcpRingOptions o;
  o.size = 2;
  o.timeout = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  auto ring = TcpRing::connect(o, nullptr);
  EXPECT_EQ(ring.status().code(), StatusCode::kUnavailable) << ring.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  o.rank = 1;
  EXPECT_EQ(TcpRing::connect(o, nullptr).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::cp
