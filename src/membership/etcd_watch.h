// EtcdWatch: a MemberWatch over etcd's streaming /v3/watch (JSON gateway): one long POST whose
// chunked answer carries one JSON object per line; a thread reads it and queues each PUT as an
// added member and each DELETE as a removed one. It starts at the revision after the range read
// when the watch was made, so nothing between the two is missed; if the stream breaks (etcd
// restarting) it reconnects with backoff from the revision after the last event seen.
//
// Thread safety: next() from one consumer thread; the reader thread is private. Destruction
// stops the reader (cancels its call, which closes the connection) and joins it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <thread>

#include "core/mutex.h"
#include "membership/etcd_client.h"
#include "membership/membership.h"
#include "net/http_client.h"

namespace keel::membership {

// The member events of one watch-stream line ({"result": {"events": [...]}}); `last_revision`
// becomes the highest mod_revision seen. Pure; lines that are not events give none.
std::vector<MemberEvent> parse_watch_line(const std::string& prefix, const std::string& line,
                                          int64_t* last_revision);

class EtcdWatch final : public MemberWatch {
 public:
  // Watches "<prefix>/members/" from `start_revision` on.
  EtcdWatch(const EtcdClient& client, std::string prefix, int64_t start_revision);
  ~EtcdWatch() override;

  std::optional<MemberEvent> next(std::chrono::milliseconds timeout) override;

 private:
  void run();
  // Reads one connection's stream until it ends, fails or stop; false on a connection error.
  bool read_stream(const EtcdEndpoint& ep);

  const EtcdClient client_;
  const std::string prefix_;
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<MemberEvent> events_ KEEL_GUARDED_BY(mu_);
  int64_t next_revision_ KEEL_GUARDED_BY(mu_);
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  net::HttpCancel cancel_;  // cancelled by the destructor: ends the stream being read
  std::thread thread_;
};

}  // namespace keel::membership
