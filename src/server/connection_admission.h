// Connection admission: what the server does with a newly accepted connection, given how many are
// open in all and from the same client address. The per-client cap (ServerConfig::
// max_connections_per_client) is looked at first, so one client that holds its share — trickling
// requests that never finish their headers, say — cannot lock every other client out; then the
// server-wide cap (max_connections). At a cap the caller closes the longest-idle keep-alive
// connection of that scope and admits the new one, or, when none there is idle, refuses it.
//
// Thread safety: a pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace keel::server {

enum class Admission {
  kAdmit,      // under both caps
  kClientCap,  // the client holds max_connections_per_client: shed its idle one, else 429
  kServerCap,  // the server holds max_connections: shed the longest-idle one, else 503
};

// `open`: connections open now (the new one not counted); `client_open`: those of the new
// connection's client address. `max_per_client` 0: no per-client cap.
[[nodiscard]] inline Admission admit_connection(size_t open, size_t client_open,
                                                int32_t max_connections, int32_t max_per_client) {
  if (max_per_client > 0 && client_open >= static_cast<size_t>(max_per_client)) {
    return Admission::kClientCap;
  }
  if (open >= static_cast<size_t>(max_connections)) return Admission::kServerCap;
  return Admission::kAdmit;
}

}  // namespace keel::server
