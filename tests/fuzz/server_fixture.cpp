// ServerFixture (see server_fixture.h).
#include "server_fixture.h"

#include <spdlog/spdlog.h>

#include <memory>

#include "../server/test_vocab.h"
#include "tokenizer/chat_template.h"

namespace keel::fuzz {
namespace {

using server::testing::kBang;
using server::testing::kEnd;
using server::testing::kHello;
using server::testing::kMore;
using server::testing::kOp;
using server::testing::kSt;
using server::testing::kWorld;

// The built-in ChatML template through the formatter `keel serve` uses for a model's template.
server::ChatFormatter chat_formatter(const tokenizer::Tokenizer* tok) {
  static const auto chatml =
      std::make_shared<const tokenizer::ChatTemplate>(tokenizer::ChatTemplate::chatml());
  return server::template_chat_formatter(chatml, tok);
}

// Built once: an immutable Tokenizer is a cheap shared handle.
const tokenizer::Tokenizer& shared_tokenizer() {
  static const tokenizer::Tokenizer tok = server::testing::make_test_tokenizer();
  return tok;
}

}  // namespace

static server::ServerConfig fuzz_config(const std::string& pic_mode) {
  server::ServerConfig c;
  c.served_model_name = "test-model";
  c.max_body_bytes = 64 * 1024;
  c.tokenizer_threads = 0;  // tokenize inline, on the fuzzing thread
  c.pic_mode = pic_mode;
  return c;
}

ServerFixture::ServerFixture(const std::string& pic_mode)
    : engine({kHello, kWorld, kBang, kSt, kOp, kMore, kEnd}, /*max_model_len=*/512),
      tokenizer(shared_tokenizer()),
      ctx(fuzz_config(pic_mode)) {
  ctx.deps.engine = &engine;
  ctx.deps.tokenizer = &tokenizer;
  ctx.deps.chat = chat_formatter(&tokenizer);
}

void quiet_logs() { spdlog::set_level(spdlog::level::off); }

}  // namespace keel::fuzz
