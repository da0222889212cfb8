// libFuzzer target for the cluster's internal messages (src/cluster/protocol/link.h, messages.h):
// bytes through the link's envelope decoder, then the body through every message decoder. A decoder
// must return a value or InvalidArgument — no crash, no sanitizer report — and what decodes must
// re-encode to a fixed point, so a message that crossed a link once crosses it again unchanged.
//
// Built by the fuzz preset (tests/fuzz/CMakeLists.txt); seeds in corpus/cluster_messages_fuzz/
// (one frame of each message type).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cluster/protocol/messages.h"
#include "net/link.h"

namespace {

using keel::cluster::Json;
using keel::net::Message;

// decode → encode → decode → encode must give the same bytes twice.
template <typename Decode, typename Encode>
void check_fixed_point(const Json& body, Decode decode, Encode encode) {
  auto value = decode(body);
  if (!value.ok()) return;
  const std::vector<uint8_t> once = keel::net::encode_message(encode(*value));
  auto message = keel::net::decode_message(once);
  if (!message.ok()) __builtin_trap();
  auto again = decode(message->body);
  if (!again.ok() || keel::net::encode_message(encode(*again)) != once) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace c = keel::cluster;
  auto message = keel::net::decode_message(std::span<const uint8_t>(data, size));
  if (!message.ok()) return 0;
  const Json& body = message->body;
  check_fixed_point(body, c::decode_submit_job, [](const auto& m) { return c::encode(m); });
  check_fixed_point(body, c::decode_submit_task, [](const auto& m) { return c::encode(m); });
  check_fixed_point(body, c::decode_abort, [](const auto& m) { return c::encode_abort_task(m); });
  check_fixed_point(body, c::decode_task_event, [](const auto& m) { return c::encode(m); });
  check_fixed_point(body, c::decode_load_report, [](const auto& m) { return c::encode(m); });
  check_fixed_point(body, c::decode_job_attempt, [](const auto& m) { return c::encode(m); });
  check_fixed_point(body, c::decode_job_failed, [](const auto& m) { return c::encode(m); });
  check_fixed_point(body, c::decode_fleet_status, [](const auto& m) {
    return Message{"reply", c::encode_body(m)};
  });
  check_fixed_point(body, c::decode_kv_fetch, [](const auto& m) { return c::encode(m); });
  check_fixed_point(body, c::decode_remove_te, [](const auto& m) { return c::encode(m); });
  (void)c::decode_status_body(body);
  return 0;
}
