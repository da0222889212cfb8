// libFuzzer target: the request JSON of every endpoint, through the server's own routing and
// validation (route_request: body parsing, field checks, model and cache-id resolution) and, for
// the generation routes, prompt preparation (chat template, tokenization, context-length rules).
// Input: one selector byte, then the request body. The selector's low 3 bits pick the route,
// bits 3-4 the server's pic_mode. Every response must be a well-formed status with a JSON body.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kv/pic.h"
#include "server/prompt_preparation.h"
#include "server/router.h"
#include "server_fixture.h"

namespace {

using keel::server::HttpRequest;
using keel::server::HttpResponse;

struct Route {
  const char* method;
  const char* path;
};
constexpr Route kRoutes[8] = {
    {"POST", "/v1/chat/completions"}, {"POST", "/v1/completions"}, {"POST", "/tokenize"},
    {"POST", "/detokenize"},          {"POST", "/v1/caches"},      {"POST", "/v1/chat/completions"},
    {"GET", "/v1/caches/"},           {"DELETE", "/v1/caches/"},
};
constexpr const char* kPicModes[4] = {"marked", "auto", "off", "marked"};

void check_response(const HttpResponse& r) {
  if (r.status < 200 || r.status > 599) std::abort();
  if (r.content_type == "application/json" && !nlohmann::json::accept(r.body)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  keel::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const Route& route = kRoutes[selector & 7];
  keel::fuzz::ServerFixture fx(kPicModes[(selector >> 3) & 3]);
  HttpRequest req;
  req.method = route.method;
  req.path = route.path;
  if (req.method == "POST") {
    req.body = std::string(rest);
  } else {
    req.path += std::string(rest);  // the id (percent-decoded by the router)
  }
  req.target = req.path;
  req.headers.emplace_back("content-type", "application/json");
  keel::server::RouteOutcome outcome = keel::server::route_request(fx.ctx, req);
  if (auto* blocking = std::get_if<keel::server::BlockingCall>(&outcome)) {
    check_response(blocking->run());
  } else if (const HttpResponse* r = std::get_if<HttpResponse>(&outcome)) {
    check_response(*r);
  } else if (auto* call = std::get_if<keel::server::GenerationCall>(&outcome)) {
    keel::server::PreparedPrompts p = keel::server::prepare_prompts(fx.ctx, call->spec);
    if (!p.error) {
      if (p.prompts.size() != call->spec.num_prompts()) std::abort();
      for (const keel::server::PreparedPrompt& prompt : p.prompts) {
        if (prompt.tokens.empty() || prompt.max_tokens < 1) std::abort();
        if (static_cast<int64_t>(prompt.tokens.size()) + prompt.max_tokens >
            fx.engine.max_model_len()) {
          std::abort();
        }
        for (int32_t id : prompt.tokens) {
          if (id < 0 || id >= fx.tokenizer.vocab_size()) std::abort();
        }
        const auto n = static_cast<int32_t>(prompt.tokens.size());
        if (!keel::kv::validate_pic_chunks(prompt.pic_chunks, n).ok()) std::abort();
      }
    }
  }
  return 0;
}
