// Server test fixtures (see server_harness.h).
#include "server_harness.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace keel::server::testing {

ServerConfig test_config() {
  ServerConfig c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.served_model_name = "test-model";
  c.io_threads = 2;
  c.tokenizer_threads = 1;
  c.max_body_bytes = 64 * 1024;
  c.shutdown_timeout_ms = 2000;
  return c;
}

ServerHarness::ServerHarness(ServerConfig config, int64_t max_model_len,
                             const tokenizer::Tokenizer* tokenizer,
                             const std::function<void(ServerDeps*)>& customize)
    : engine_(std::make_unique<FakeEngine>(max_model_len)),
      own_tokenizer_(make_test_tokenizer()),
      tokenizer_(tokenizer != nullptr ? tokenizer : &own_tokenizer_) {
  engine_->set_tokenizer(tokenizer_);  // stop strings are decided by the (fake) engine
  ServerDeps deps;
  deps.engine = engine_.get();
  deps.tokenizer = tokenizer_;
  deps.chat = chatml_tracked;
  deps.ready = &ready_;
  if (customize) customize(&deps);
  Result<std::unique_ptr<Server>> s = Server::start(std::move(config), std::move(deps));
  KEEL_CHECK_MSG(s.ok(), s.status().to_string().c_str());
  server_ = std::move(s).value();
}

ServerHarness::~ServerHarness() {
  server_->shutdown();
  server_.reset();
  engine_.reset();
}

}  // namespace keel::server::testing
