// Shared fixtures of the server tests: the synthetic tokenizer and ChatML formatter of
// test_vocab.h, and ServerHarness — a real Server on 127.0.0.1 (ephemeral port) in front of a
// FakeEngine.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "fake_engine.h"
#include "server/server.h"
#include "test_http_client.h"
#include "test_vocab.h"
#include "tokenizer/tokenizer.h"

namespace keel::server::testing {

ServerConfig test_config();

class ServerHarness {
 public:
  // `customize` may change the deps (formatter, tool format, reasoning parser) before the start.
  explicit ServerHarness(ServerConfig config = test_config(), int64_t max_model_len = 256,
                         const tokenizer::Tokenizer* tokenizer = nullptr,
                         const std::function<void(ServerDeps*)>& customize = {});
  ~ServerHarness();

  [[nodiscard]] uint16_t port() const { return server_->port(); }
  FakeEngine& engine() { return *engine_; }
  Server& server() { return *server_; }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  std::atomic<bool>& ready() { return ready_; }

 private:
  std::unique_ptr<FakeEngine> engine_;
  tokenizer::Tokenizer own_tokenizer_;
  const tokenizer::Tokenizer* tokenizer_;
  std::atomic<bool> ready_{true};
  std::unique_ptr<Server> server_;
};

}  // namespace keel::server::testing
