// KV transfer bandwidth: blocks of TinyLlama-1.1B's shape (16 tokens × 22 layers × (K, V) × 4 KV
// heads × 64 dims × 4 bytes f32 = 720,896 bytes) streamed by a KvTransferClient to a
// KvTransferServer in the same process over UCX (UCX_TLS as set; by default UCX picks shared
// memory, sysv + cma, for a same-host peer), against two raw probes of the same bytes in the same
// run: a plain TCP loopback stream (one writer thread, one reader thread) and a memcpy into a
// memfd shared mapping larger than the cache. Two clients to the same server, round by round in
// alternating order: "kv_batched" sends the blocks queued together as one message (up to
// --blocks-per-frame blocks, default 16, and --frame-mb MB, default the client's 8 MiB: frames of
// kv_batch_frame.h), "kv_1_per_msg" one block per message (the one-block frame). Prints GB/s
// (10^9 bytes/s) of each and their ratios to the probes.
// Then the exposed transfer time of a simulated prefill, streamed against copied after it.
//   keel_kv_transfer_bench [--blocks N] [--rounds R] [--in-flight F] [--prefill-blocks B]
//                          [--compute-ms MS] [--blocks-per-frame K] [--frame-mb MB]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cluster/transfer/kv_transfer_client.h"
#include "cluster/transfer/kv_transfer_server.h"

namespace {

using Clock = std::chrono::steady_clock;
using keel::cluster::KvBlockToSend;

// TinyLlama-1.1B: 22 layers, 4 KV heads × 64 dims, f32, block of 16 tokens.
constexpr size_t kBlockBytes = size_t{16} * 22 * 2 * 4 * 64 * 4;
static_assert(kBlockBytes == 720896);

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<std::byte> pattern(size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return v;
}

// GB/s of one round of `blocks` blocks through the KV transfer service; 0 on failure.
// CPU seconds (user + system, every thread) this process has used.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Adds the CPU seconds of the timed part to *cpu.
double kv_transfer_round(keel::cluster::KvTransferServer& server,
                         keel::cluster::KvTransferClient& client, int blocks, int round,
                         const std::vector<std::byte>& source, double* cpu) {
  std::vector<KvBlockToSend> todo;
  for (int i = 0; i < blocks; ++i) {  // built before the clock starts
    KvBlockToSend b;
    b.block_hash = {static_cast<uint64_t>(round) * 100000 + i + 1, 7};
    b.num_tokens = 16;
    b.payload = source;
    todo.push_back(std::move(b));
  }
  const int64_t before = server.stats().blocks_accepted;
  const double c0 = cpu_seconds();
  const auto t0 = Clock::now();
  for (auto& b : todo) {
    if (!client.send(std::move(b)).ok()) return 0;
  }
  if (!client.flush(Clock::now() + std::chrono::seconds(60)).ok()) return 0;
  while (server.stats().blocks_accepted < before + blocks) {
    if (seconds_since(t0) > 60) return 0;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  const double s = seconds_since(t0);
  *cpu += cpu_seconds() - c0;
  return static_cast<double>(blocks) * kBlockBytes / s / 1e9;
}

// Milliseconds of transfer left exposed after a simulated prefill that fills one block every
// `compute_ms` (a sleep: the compute itself is not simulated): with `stream`, each block is sent
// as it fills (overlapped); without, all are sent once the prefill ends (a copy after prefill).
// Exposed = from the prefill's end until the receiver holds the last block; -1 on failure.
double exposed_ms(keel::cluster::KvTransferServer& server, keel::cluster::KvTransferClient& client,
                  int blocks, double compute_ms, bool stream, int round,
                  const std::vector<std::byte>& source) {
  const int64_t before = server.stats().blocks_accepted;
  std::vector<KvBlockToSend> held;
  for (int i = 0; i < blocks; ++i) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(compute_ms));
    KvBlockToSend b;
    b.block_hash = {static_cast<uint64_t>(round) * 100000 + i + 1, 9};
    b.num_tokens = 16;
    b.payload = source;  // the copy out of the pool (Engine::read_kv_block)
    if (stream) {
      if (!client.send(std::move(b)).ok()) return -1;
    } else {
      held.push_back(std::move(b));
    }
  }
  const auto end_of_prefill = Clock::now();
  for (auto& b : held) {
    if (!client.send(std::move(b)).ok()) return -1;
  }
  while (server.stats().blocks_accepted < before + blocks) {
    if (seconds_since(end_of_prefill) > 60) return -1;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return seconds_since(end_of_prefill) * 1e3;
}

// GB/s of the same bytes over a TCP loopback connection (writer and reader threads).
double tcp_probe(int blocks, const std::vector<std::byte>& source) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return 0;
  }
  const size_t total = static_cast<size_t>(blocks) * kBlockBytes;
  std::atomic<bool> ok{true};
  std::thread reader([&] {
    const int fd = accept(listener, nullptr, nullptr);
    std::vector<std::byte> buf(kBlockBytes);
    size_t got = 0;
    while (got < total) {
      const ssize_t n = read(fd, buf.data(), buf.size());
      if (n <= 0) {
        ok = false;
        break;
      }
      got += static_cast<size_t>(n);
    }
    close(fd);
  });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) ok = false;
  const auto t0 = Clock::now();
  for (int b = 0; b < blocks && ok; ++b) {
    size_t off = 0;
    while (off < kBlockBytes) {
      const ssize_t n = write(fd, source.data() + off, kBlockBytes - off);
      if (n <= 0) {
        ok = false;
        break;
      }
      off += static_cast<size_t>(n);
    }
  }
  reader.join();
  const double s = seconds_since(t0);
  close(fd);
  close(listener);
  return ok ? static_cast<double>(total) / s / 1e9 : 0;
}

// GB/s of memcpy of the same bytes into a memfd shared mapping (a ring of 64 block slots, 46 MB:
// larger than the last-level cache, as a receiver's fresh buffers are).
double shm_probe(int blocks, const std::vector<std::byte>& source) {
  constexpr int kSlots = 64;
  const int fd = memfd_create("keel-kv-probe", 0);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(kSlots * kBlockBytes)) != 0) return 0;
  void* map = mmap(nullptr, kSlots * kBlockBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return 0;
  auto* ring = static_cast<std::byte*>(map);
  std::memset(ring, 0, kSlots * kBlockBytes);  // fault the pages in before timing
  const auto t0 = Clock::now();
  for (int b = 0; b < blocks; ++b) {
    std::memcpy(ring + static_cast<size_t>(b % kSlots) * kBlockBytes, source.data(), kBlockBytes);
  }
  const double s = seconds_since(t0);
  munmap(map, kSlots * kBlockBytes);
  return static_cast<double>(blocks) * kBlockBytes / s / 1e9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int blocks = 256;
  int rounds = 5;
  int in_flight = 8;
  int prefill_blocks = 32;  // a 512-token prompt
  double compute_ms = 20;   // per block of the simulated prefill
  keel::cluster::KvTransferClientOptions co;
  co.max_blocks_per_frame = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--blocks") blocks = std::atoi(argv[i + 1]);
    if (flag == "--rounds") rounds = std::atoi(argv[i + 1]);
    if (flag == "--in-flight") in_flight = std::atoi(argv[i + 1]);
    if (flag == "--prefill-blocks") prefill_blocks = std::atoi(argv[i + 1]);
    if (flag == "--compute-ms") compute_ms = std::atof(argv[i + 1]);
    if (flag == "--blocks-per-frame") co.max_blocks_per_frame = std::atoi(argv[i + 1]);
    if (flag == "--frame-mb")
      co.max_frame_bytes = static_cast<size_t>(std::atof(argv[i + 1]) * 1e6);
  }
  const char* tls = std::getenv("UCX_TLS");
  std::printf(
      "block %zu bytes (TinyLlama-1.1B, 16 tokens, f32); %d blocks (%.1f MB) x %d rounds;"
      " UCX_TLS=%s\n",
      kBlockBytes, blocks, blocks * kBlockBytes / 1e6, rounds, tls ? tls : "(default)");
  const std::vector<std::byte> source = pattern(kBlockBytes, 1);

  keel::cluster::KvTransferServerOptions so;
  so.kv_identity = {1, 2};
  so.payload_bytes = kBlockBytes;
  auto server = keel::cluster::KvTransferServer::start(so, [](const auto&, auto) {});
  if (!server.ok()) {
    std::fprintf(stderr, "server: %s\n", server.status().to_string().c_str());
    return 1;
  }
  co.port = (*server)->port();
  co.kv_identity = so.kv_identity;
  co.max_in_flight = in_flight;
  if (const keel::Status s = co.validate(); !s.ok()) {
    std::fprintf(stderr, "client options: %s\n", s.to_string().c_str());
    return 1;
  }
  keel::cluster::KvTransferClientOptions one = co;
  one.max_blocks_per_frame = 1;
  auto client = keel::cluster::KvTransferClient::connect(co);
  auto client_1 = keel::cluster::KvTransferClient::connect(one);
  if (!client.ok() || !client_1.ok()) {
    std::fprintf(stderr, "client: %s\n",
                 (client.ok() ? client_1.status() : client.status()).to_string().c_str());
    return 1;
  }
  std::printf("kv_batched: up to %d blocks, %.1f MB a message\n", co.max_blocks_per_frame,
              static_cast<double>(co.max_frame_bytes) / 1e6);
  std::vector<double> kv, kv1, tcp, shm;
  double kv_cpu = 0, kv1_cpu = 0, tcp_cpu = 0;  // CPU seconds of each method over every round
  double warm_cpu = 0;                          // warm-up: connection, pools
  (void)kv_transfer_round(**server, **client, 16, 0, source, &warm_cpu);
  (void)kv_transfer_round(**server, **client_1, 16, 0, source, &warm_cpu);
  std::printf("%s", (*client)->describe_transport().c_str());
  for (int r = 1; r <= rounds; ++r) {
    if (r % 2 == 1) kv.push_back(kv_transfer_round(**server, **client, blocks, r, source, &kv_cpu));
    kv1.push_back(kv_transfer_round(**server, **client_1, blocks, 1000 + r, source, &kv1_cpu));
    if (r % 2 == 0) kv.push_back(kv_transfer_round(**server, **client, blocks, r, source, &kv_cpu));
    const double c0 = cpu_seconds();
    tcp.push_back(tcp_probe(blocks, source));
    tcp_cpu += cpu_seconds() - c0;
    shm.push_back(shm_probe(blocks, source));
    std::printf(
        "round %d: kv_batched %.2f GB/s  kv_1_per_msg %.2f GB/s  tcp_loopback %.2f GB/s  "
        "shm_memcpy %.2f GB/s\n",
        r, kv.back(), kv1.back(), tcp.back(), shm.back());
  }
  const auto st = (*client)->stats();
  std::printf("kv_batched: %.1f blocks a message on average\n",
              st.messages_sent > 0 ? static_cast<double>(st.blocks_sent) / st.messages_sent : 0);
  const double gb = static_cast<double>(rounds) * blocks * kBlockBytes / 1e9;
  std::printf(
      "cpu: kv_batched %.2f s/GB  kv_1_per_msg %.2f s/GB  tcp_loopback %.2f s/GB (all threads; "
      "lower is better)\n",
      kv_cpu / gb, kv1_cpu / gb, tcp_cpu / gb);
  const double k = median(kv), k1 = median(kv1), t = median(tcp), m = median(shm);
  std::printf(
      "median: kv_batched %.2f GB/s  kv_1_per_msg %.2f GB/s  tcp_loopback %.2f GB/s  shm_memcpy "
      "%.2f GB/s\n",
      k, k1, t, m);
  std::printf(
      "ratio: kv_batched / tcp_loopback = %.2f   kv_1_per_msg / tcp_loopback = %.2f   "
      "kv_1_per_msg / shm_memcpy = %.2f\n",
      t > 0 ? k / t : 0, t > 0 ? k1 / t : 0, m > 0 ? k1 / m : 0);
  int round = 90;
  for (auto* c : {&*client_1, &*client}) {
    const double streamed =
        exposed_ms(**server, **c, prefill_blocks, compute_ms, true, round++, source);
    const double after =
        exposed_ms(**server, **c, prefill_blocks, compute_ms, false, round++, source);
    std::printf(
        "exposed transfer after a %d-block prefill (%.0f ms/block), %s: streamed %.1f ms, copy "
        "after prefill %.1f ms\n",
        prefill_blocks, compute_ms, c == &*client ? "kv_batched" : "kv_1_per_msg", streamed, after);
  }
  return k > 0 && k1 > 0 ? 0 : 1;
}
