// RequestIdSource (see server_context.h): splitmix64 over (salt + counter) twice gives 32 hex
// digits per id; the salt comes from std::random_device once per server.
#include <fmt/format.h>

#include <random>

#include "server/server_context.h"

namespace keel::server {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

RequestIdSource::RequestIdSource() {
  std::random_device rd;
  salt_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::string RequestIdSource::next() {
  const uint64_t c = counter_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t a = splitmix64(salt_ + 2 * c);
  const uint64_t b = splitmix64(salt_ + 2 * c + 1);
  return fmt::format("{:016x}{:016x}", a, b);
}

}  // namespace keel::server
