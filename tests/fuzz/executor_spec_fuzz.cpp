// libFuzzer target for the executors' start-up specs and the messages that carry an engine spec
// (src/cluster/protocol/te_spec.h, je_spec.h, node_messages.h, bind_model.h): a TE's or JE's stdin
// and a node agent's or warm TE's calls are untrusted bytes from another process. A decoder must
// return a value or an error — no crash, no sanitizer report — and what decodes must re-encode to a
// fixed point, so a spec handed on (a replacement's, a bind's) is the spec that was read.
//
// Built by the fuzz preset (tests/fuzz/CMakeLists.txt); seeds in corpus/executor_spec_fuzz/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cluster/protocol/bind_model.h"
#include "cluster/protocol/je_spec.h"
#include "cluster/protocol/node_messages.h"
#include "cluster/protocol/te_spec.h"

namespace {

using keel::cluster::Json;

// text → spec → text → spec → text: the two texts must be equal.
template <typename Parse, typename Text>
void check_text_fixed_point(std::string_view text, Parse parse, Text to_text) {
  auto spec = parse(text);
  if (!spec.ok()) return;
  const std::string once = to_text(*spec);
  auto again = parse(once);
  if (!again.ok() || to_text(*again) != once) __builtin_trap();
}

// body → value → body → value → body: the two bodies must be equal.
template <typename Decode, typename Encode>
void check_body_fixed_point(const Json& body, Decode decode, Encode encode) {
  auto value = decode(body);
  if (!value.ok()) return;
  const Json once = encode(*value);
  auto again = decode(once);
  if (!again.ok() || encode(*again) != once) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace c = keel::cluster;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_text_fixed_point(text, c::parse_te_spec, c::te_spec_text);
  check_text_fixed_point(text, c::parse_je_spec, c::je_spec_text);
  const Json body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;
  check_body_fixed_point(body, c::decode_start_te, [](const auto& m) { return c::encode(m).body; });
  check_body_fixed_point(body, c::decode_stop_te, [](const auto& m) { return c::encode(m).body; });
  check_body_fixed_point(body, c::decode_fence, [](const auto& m) { return c::encode(m).body; });
  check_body_fixed_point(body, c::decode_start_te_reply,
                         [](const auto& m) { return c::encode_body(m); });
  check_body_fixed_point(body, c::decode_bind_model,
                         [](const auto& m) { return c::encode_bind_model(m).body; });
  return 0;
}
