// ServerFixture: what the server fuzz targets drive — a ServerContext as Server::start builds it,
// over a SyncEngine (every request generates "▁Hello▁world!STOP▁more▁end"), the server tests'
// synthetic SPM tokenizer, and the built-in ChatML ChatTemplate rendered as `keel serve` renders
// a model's template. One fixture per fuzz input, so inputs do not depend on each other (context
// caches, request ids); the tokenizer and the template, immutable, are built once.
//
// Thread safety: one owner; a fixture serves one fuzz input on one thread.
#pragma once

#include <string>

#include "server/server_context.h"
#include "sync_engine.h"
#include "tokenizer/tokenizer.h"

namespace keel::fuzz {

struct ServerFixture {
  // pic_mode: ServerConfig::pic_mode ("marked", "auto" or "off").
  explicit ServerFixture(const std::string& pic_mode = "marked");
  ServerFixture(const ServerFixture&) = delete;
  ServerFixture& operator=(const ServerFixture&) = delete;

  SyncEngine engine;
  tokenizer::Tokenizer tokenizer;
  server::ServerContext ctx;
};

// Silences keel's log (the server logs failed connections; a fuzzer runs millions of them).
void quiet_logs();

}  // namespace keel::fuzz
