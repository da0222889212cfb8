// Forking a model store entry between TEs' weights services, in process on loopback (the wire is
// the same as between processes): a fork is byte-equal and leaves only the final entry; a chain
// relay (C from B while B receives from A) is byte-equal at both hops; a chunk whose byte was
// flipped before its frame checksum (the entry hash catches it), a truncated stream, an
// unreachable peer, an entry the peer lacks — each fails with a clear error and leaves neither an
// entry nor a partial file. The weights layer never parses the entry, so the "entry" here is
// plain bytes under an entry name. Every wait is bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cluster/weights/weights_fork.h"
#include "cluster/weights/weights_receiver.h"
#include "cluster/weights/weights_server.h"
#include "support/test_support.h"

namespace keel::cluster {
namespace {

using namespace std::chrono_literals;

constexpr const char* kEntry = "keel-store-0123456789abcdef-l1-avx2";
constexpr uint64_t kChunk = 256 << 10;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The names in `dir`.
std::vector<std::string> names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  return out;
}

// A "host": a store directory, its receiver and its weights service.
struct Host {
  std::string dir;
  std::unique_ptr<WeightsReceiver> receiver;
  std::unique_ptr<WeightsServer> server;

  explicit Host(const std::string& tag, WeightsFaults faults = {}) {
    dir = keel::testing::make_temp_dir(tag);
    auto r = WeightsReceiver::start("127.0.0.1", dir);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (r.ok()) receiver = std::move(*r);
    WeightsServerConfig c;
    c.store_dir = dir;
    c.receiver = receiver.get();
    c.deadline = 20s;
    c.relay_wait = 2s;
    c.faults = faults;
    auto s = WeightsServer::start(std::move(c));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) server = std::move(*s);
  }
  ~Host() {
    server.reset();
    receiver.reset();
    std::filesystem::remove_all(dir);
  }
  [[nodiscard]] std::string entry_path() const { return dir + "/" + kEntry; }
};

// An entry of `n` bytes (not a multiple of the chunk size) in `host`'s store.
std::string put_entry(const Host& host, size_t n = 3 * kChunk + 1234) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  std::ofstream(host.entry_path(), std::ios::binary) << bytes;
  return bytes;
}

TEST(WeightsForkTest, ForkIsByteEqualAndLeavesOnlyTheEntry) {
  Host a("fork-a"), b("fork-b");
  const std::string bytes = put_entry(a);
  auto r = fork_entry(a.server->address(), kEntry, b.receiver.get(), 20s, kChunk);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->path, b.entry_path());
  EXPECT_EQ(r->bytes, bytes.size());
  EXPECT_EQ(read_all(b.entry_path()), bytes);
  EXPECT_EQ(names(b.dir), std::vector<std::string>{kEntry});
  EXPECT_EQ(
      std::filesystem::status(b.entry_path()).permissions() & std::filesystem::perms::owner_write,
      std::filesystem::perms::none)
      << "a finished entry is read-only";
  EXPECT_EQ(a.server->stats().served, 1);
  EXPECT_EQ(b.receiver->stats().chunks, 4);
  // The three full chunks (rendezvous payloads) land straight in the entry's mapping; the
  // 1234-byte tail travels inside its message (eager) and is copied.
  EXPECT_EQ(b.receiver->stats().in_place_chunks, 3);
}

TEST(WeightsForkTest, ChainRelayForwardsWhileReceiving) {
  // A's link is slow (10 MB at 10 MB/s), and C asks B once B holds its first chunk: C's call
  // reaches B while B is still receiving (about a second to spare, even on a loaded machine).
  Host a("chain-a", WeightsFaults{.throttle_bytes_per_s = 10e6}), b("chain-b"), c("chain-c");
  const std::string bytes = put_entry(a, 40 * kChunk + 7);
  Result<ForkResult> rb = Status::internal("not run");
  std::thread tb(
      [&] { rb = fork_entry(a.server->address(), kEntry, b.receiver.get(), 20s, kChunk); });
  const auto by = std::chrono::steady_clock::now() + 10s;
  while (b.receiver->stats().chunks == 0 && std::chrono::steady_clock::now() < by) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_GT(b.receiver->stats().chunks, 0) << "B never started receiving";
  // B relays: it forwards what it holds, then every chunk as it lands.
  auto rc = fork_entry(b.server->address(), kEntry, c.receiver.get(), 20s, kChunk);
  tb.join();
  ASSERT_TRUE(rb.ok()) << rb.status().to_string();
  ASSERT_TRUE(rc.ok()) << rc.status().to_string();
  EXPECT_EQ(read_all(b.entry_path()), bytes);
  EXPECT_EQ(read_all(c.entry_path()), bytes);
  EXPECT_EQ(b.server->stats().relayed, 1);
  EXPECT_EQ(a.server->stats().served, 1) << "the source sent the entry once";
  EXPECT_EQ(b.receiver->stats().relayed_chunks, 41) << "every chunk forwarded, none twice";
}

void expect_fails_clean(Host& src, Host& dst, const std::string& needle) {
  auto r = fork_entry(src.server->address(), kEntry, dst.receiver.get(), 20s, kChunk);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().to_string().find(needle), std::string::npos) << r.status().to_string();
  EXPECT_TRUE(names(dst.dir).empty()) << "no entry, no partial file";
}

TEST(WeightsForkTest, FlippedByteFailsOnTheEntryHash) {
  Host a("flip-a", WeightsFaults{.flip_chunk = 2}), b("flip-b");
  put_entry(a);
  expect_fails_clean(a, b, "content hash mismatch");
  // The receiver is usable again: a good source forks fine.
  Host good("flip-good");
  put_entry(good);
  EXPECT_TRUE(fork_entry(good.server->address(), kEntry, b.receiver.get(), 20s, kChunk).ok());
}

TEST(WeightsForkTest, TruncatedStreamFails) {
  Host a("trunc-a", WeightsFaults{.stop_after_chunks = 2}), b("trunc-b");
  put_entry(a);
  expect_fails_clean(a, b, "truncated");
}

TEST(WeightsForkTest, MissingEntryOrPeerFails) {
  Host a("missing-a"), b("missing-b");
  // a has no entry and is not receiving one: after its relay wait, NotFound from the peer.
  auto r = fork_entry(a.server->address(), kEntry, b.receiver.get(), 10s, kChunk);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().to_string().find("no such entry"), std::string::npos)
      << r.status().to_string();
  EXPECT_TRUE(names(b.dir).empty());
  const uint16_t port = a.server->port();
  a.server.reset();
  auto gone = fork_entry("127.0.0.1:" + std::to_string(port), kEntry, b.receiver.get(), 2s, kChunk);
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(names(b.dir).empty());
}

TEST(WeightsForkTest, ProbeIsDropped) {
  Host a("probe-a"), b("probe-b");
  auto s = probe_weights_link(a.server->address(), b.receiver.get(), 5 * kChunk, 20s, kChunk);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_GT(*s, 0.0);
  EXPECT_TRUE(keel::testing::eventually(
      [&] { return b.receiver->stats().probe_bytes == static_cast<int64_t>(5 * kChunk); }, 5s));
  EXPECT_TRUE(names(b.dir).empty());
}

TEST(WeightsForkTest, EntryProbeSendsTheEntrysBytesAndIsDropped) {
  Host a("eprobe-a"), b("eprobe-b");
  const std::string bytes = put_entry(a);
  auto s =
      probe_weights_link(a.server->address(), b.receiver.get(), 1ull << 40, 20s, kChunk, kEntry);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_TRUE(keel::testing::eventually(
      [&] { return b.receiver->stats().probe_bytes == static_cast<int64_t>(bytes.size()); }, 5s))
      << "the entry's size, not the size asked for: " << b.receiver->stats().probe_bytes;
  EXPECT_TRUE(names(b.dir).empty()) << "a probe stores nothing";
  EXPECT_EQ(a.server->stats().probes, 1);
  EXPECT_EQ(a.server->stats().served, 0);
  auto missing = probe_weights_link(a.server->address(), b.receiver.get(), kChunk, 5s, kChunk,
                                    "keel-store-ffffffffffffffff-l1-avx2");
  EXPECT_FALSE(missing.ok()) << "a probe of an entry the peer lacks";
}

TEST(WeightsForkTest, RequestCodecRejectsBadInput) {
  WeightsFetchRequest q{kEntry, "127.0.0.1:1", 7, kChunk, 0};
  net::Message m = encode(q);
  auto back = decode_weights_fetch(m.body);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, q);
  Json bad = m.body;
  bad["chunk_bytes"] = 0;
  EXPECT_FALSE(decode_weights_fetch(bad).ok());
  bad = m.body;
  bad["probe_bytes"] = 10;  // an entry probe
  EXPECT_EQ(decode_weights_fetch(bad)->probe_bytes, 10u);
  bad["entry"] = "";
  bad["probe_bytes"] = 0;  // neither
  EXPECT_FALSE(decode_weights_fetch(bad).ok());
  bad = m.body;
  bad.erase("reply_to");
  EXPECT_FALSE(decode_weights_fetch(bad).ok());
  EXPECT_FALSE(parse_weights_faults("flip").ok());
  EXPECT_FALSE(parse_weights_faults("bend:1").ok());
  EXPECT_EQ(parse_weights_faults("stop:3")->stop_after_chunks, 3);
  EXPECT_FALSE(check_weights_chunk({90, 100, 0, 0}, 11).ok());
  EXPECT_TRUE(check_weights_chunk({90, 100, 0, 0}, 10).ok());
}

}  // namespace
}  // namespace keel::cluster
