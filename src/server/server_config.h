// ServerConfig: every knob of the HTTP front end, documented where declared, with validate().
// Defaults suit a local `keel serve`; the CLI maps its flags onto these fields.
//
// Thread safety: a plain value; the server keeps its own const copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace keel::server {

struct ServerConfig {
  // Address to listen on (IPv4 or IPv6 literal, or "localhost").
  std::string host = "127.0.0.1";
  // TCP port; 0 picks an ephemeral port (Server::port() reports the bound one).
  int32_t port = 8000;
  // When non-empty, every /v1/*, /tokenize and /detokenize request needs
  // `Authorization: Bearer <api_key>` (401 otherwise). /health, /metrics and OPTIONS stay open.
  std::string api_key;
  // When non-empty, the API keys file (`--api-keys-file`; JSON Lines, docs/tenants.md): each key
  // names a tenant with a weight and quotas; such keys are accepted besides api_key, their
  // requests get 429 past their tenant's quotas, their prefix-cache salt is scoped to the tenant,
  // and the engine admits tenants fairly (engine/vtc.h). Re-read when the file changes.
  std::string api_keys_file;
  // With api_keys_file: the directory where the tenants' quota windows are kept and shared with
  // the other gateways of a cluster (`--quota-dir`; server/quota_dir.h), so a tenant's quotas
  // hold over all of them together; "" = `<responses_dir>/quotas` when responses_dir is set, else
  // this process's own windows in memory.
  std::string quota_dir;
  // The model id clients must name (`model` may also be omitted) and /v1/models lists.
  std::string served_model_name = "keel";
  // When non-empty, /v1/models shows it as the model's `description` (keel serve says there that
  // the built-in default model has random weights).
  std::string model_description;
  // Request bodies above this many bytes get 413 (checked on Content-Length before the body is
  // read, and enforced by the body parser for chunked bodies).
  size_t max_body_bytes = size_t{8} << 20;
  // Request-body bytes all connections together may hold in memory at once (Content-Length is
  // reserved before the body is read, chunked bodies as they arrive); a request that does not fit
  // gets 503 and its connection closes. At least max_body_bytes.
  size_t max_inflight_body_bytes = size_t{128} << 20;
  // Open connections at most. At the cap a new connection closes the longest-idle keep-alive
  // connection (one waiting for its next request); when none is idle the new one gets 503 and is
  // closed. `keel serve` also keeps it below the process's descriptor limit.
  int32_t max_connections = 1024;
  // Open connections one client address may hold at most (0: no cap), so that one client cannot
  // take every connection (slowloris). At its cap a client's new connection closes that client's
  // longest-idle keep-alive connection; when none is idle it gets 429 (too_many_connections) and
  // is closed. Behind a proxy that opens every connection itself, raise it or set 0.
  int32_t max_connections_per_client = 256;
  // Limit on the request line plus headers (431-style overflows answer 400 and close).
  uint32_t max_header_bytes = 16 * 1024;
  // Threads running the io_context (HTTP parsing, routing, tokenization, detokenization).
  int32_t io_threads = 2;
  // Threads of the prompt tokenization pool; 0 tokenizes on the io threads.
  int32_t tokenizer_threads = 1;
  // A keep-alive connection may idle this long between requests, and a request's body must
  // arrive within it of the end of its header.
  int64_t idle_timeout_ms = 60'000;
  // A request's line and headers must arrive whole within this long of its first byte (one
  // deadline for the whole header, not per read: a client trickling a byte at a time is closed).
  int64_t header_timeout_ms = 10'000;
  // Limit on writing one response or SSE chunk to a slow client.
  int64_t write_timeout_ms = 30'000;
  // Wall-clock limit on one generation request (queue + prefill + decode); on expiry the engine
  // requests are aborted and the client gets 408 (or an SSE error). 0 disables.
  int64_t request_timeout_ms = 0;
  // Largest `n` (choices per prompt) accepted.
  int32_t max_n = 128;
  // Largest number of engine requests one HTTP request may expand into (prompts × n).
  int32_t max_choices_per_request = 256;
  // Largest number of stop strings (OpenAI allows 4; vLLM has no limit) and their byte length.
  int32_t max_stop_strings = 4;
  int32_t max_stop_string_bytes = 1024;
  // Origins allowed by CORS (`--cors-origins`): exact origins ("http://localhost:3000") or "*"
  // for any. Empty (the default) sends no CORS headers at all, so a web page of another origin
  // cannot read responses or send preflighted requests (JSON bodies, Authorization) to the server.
  std::vector<std::string> cors_allowed_origins;
  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter (`--allow-runtime-lora`; vLLM's
  // VLLM_ALLOW_RUNTIME_LORA_UPDATING). Off: they answer 404, since loading reads any path the
  // server can. Adapters given at start (`--lora`) are served either way.
  bool allow_runtime_lora = false;
  // shutdown() waits this long for open connections to finish before stopping the io threads.
  int64_t shutdown_timeout_ms = 5'000;

  // Batch API (/v1/batches): batch lines run at most this many at once, over the same
  // EngineClient as other requests (behind a gateway they spread over the fleet); each runs on a
  // batch worker thread of its own, never on an io thread.
  int32_t batch_concurrency = 8;
  // Most requests (lines) one batch input file may hold (OpenAI's limit is 50,000).
  int32_t max_batch_requests = 50'000;
  // Bytes all /v1/files together may hold in memory (uploads and batch results; each file is
  // charged its size plus 512 bytes); an upload that does not fit gets 400 file_store_full. One
  // upload is bounded by max_body_bytes (413 past it).
  size_t max_file_store_bytes = size_t{256} << 20;
  // Where files, batches and their progress are kept so they survive a restart (`--state-dir`;
  // state/state_store.h): a batch still running when the server stops resumes at the next start
  // on the same directory, without running its finished lines again. The directory is locked:
  // a second server on it fails to start. Empty (the default here): memory only.
  std::string state_dir;

  // Responses API (/v1/responses): stored responses kept at most (count and bytes: each charged
  // its JSON, 4 bytes a token id and 512 bytes); past either the oldest finished ones are
  // forgotten. With state_dir they are kept there too and survive a restart.
  // responses_dir (`--responses-dir`): the stored responses live there instead, a directory the
  // gateways of a cluster share (not locked; responses_store.h, "Shared"), so a response created
  // through one gateway is retrieved, deleted and continued through any; "" = state_dir's.
  std::string responses_dir;
  int32_t max_stored_responses = 10'000;
  size_t max_response_store_bytes = size_t{256} << 20;
  // `background: true` responses run at most this many at once (worker threads of their own,
  // never the io threads); the others wait as "queued".
  int32_t background_responses = 4;

  // Position-independent chunks in chat prompts (EPIC): "marked" honours content parts marked
  // cache_control position_independent; "auto" also marks every message before the last user
  // message; "off" ignores the marks.
  std::string pic_mode = "marked";

  // Ok, or InvalidArgument naming the first bad field and its value.
  [[nodiscard]] Status validate() const;
};

}  // namespace keel::server
