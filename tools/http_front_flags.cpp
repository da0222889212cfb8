// The HTTP front end's flags (see http_front_flags.h).
#include "http_front_flags.h"

#include <sys/resource.h>

#include <algorithm>

namespace keel::cli {
namespace {

// Descriptors kept free for everything but client sockets (the model file, logs, the epoll and
// event descriptors, disk-tier files being written, a gateway's cluster links).
constexpr int64_t kReservedDescriptors = 64;

}  // namespace

void add_http_front_flags(CLI::App* cmd, ServeOptions* o) {
  cmd->add_option("--max-body-bytes", o->max_body_bytes,
                  "Largest request body (a /v1/files upload too); larger ones get 413")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 34));
  cmd->add_option("--max-inflight-body-bytes", o->max_inflight_body_bytes,
                  "Request-body bytes held in memory at once, all connections together")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 40));
  cmd->add_option("--max-connections", o->max_connections,
                  "Open connections at most (idle keep-alive ones are closed first)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-connections-per-client", o->max_connections_per_client,
                  "Open connections one client address may hold (its idle ones are closed "
                  "first, then 429); 0 = no cap (e.g. behind a proxy that opens them all)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--header-timeout", o->header_timeout_s,
                  "Seconds a request's line and headers may take to arrive, from its first byte")
      ->check(CLI::Range(0.001, 3600.0));
  cmd->add_option("--io-threads", o->io_threads, "HTTP threads")->check(CLI::Range(1, 64));
  cmd->add_option("--batch-concurrency", o->batch_concurrency,
                  "Batch API (/v1/batches) lines run at once")
      ->check(CLI::Range(1, 1024));
}

int64_t raise_descriptor_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 1024;
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  return lim.rlim_cur == RLIM_INFINITY ? int64_t{1} << 30 : static_cast<int64_t>(lim.rlim_cur);
}

int32_t connection_cap(int32_t wanted, int64_t descriptor_limit) {
  int64_t room = descriptor_limit - kReservedDescriptors;
  if (room < 16) room = std::max<int64_t>(1, descriptor_limit / 2);
  return static_cast<int32_t>(std::min<int64_t>(wanted, room));
}

void apply_http_front(const ServeOptions& o, int64_t descriptor_limit, server::ServerConfig* c) {
  c->max_body_bytes = static_cast<size_t>(o.max_body_bytes);
  // The in-flight budget holds at least one largest body.
  c->max_inflight_body_bytes =
      static_cast<size_t>(std::max(o.max_inflight_body_bytes, o.max_body_bytes));
  c->max_connections = connection_cap(o.max_connections, descriptor_limit);
  c->max_connections_per_client = o.max_connections_per_client;
  c->header_timeout_ms = static_cast<int64_t>(o.header_timeout_s * 1000);
  c->io_threads = o.io_threads;
  c->batch_concurrency = o.batch_concurrency;
  // The file store holds at least one largest upload.
  c->max_file_store_bytes = std::max(c->max_file_store_bytes, c->max_body_bytes);
}

}  // namespace keel::cli
