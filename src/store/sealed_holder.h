// SealedHolder: keeps model store entries as sealed memfds in the holding process. An entry is
// written into a memfd (memfd_create with MFD_ALLOW_SEALING), then sealed — F_SEAL_SHRINK,
// F_SEAL_GROW, F_SEAL_WRITE and F_SEAL_SEAL — so that from then on no process, root included, can
// change its bytes or its size: a writable shared mapping or a write() is refused by the kernel,
// and the seals themselves cannot be lifted. The store directory names the entry by a symbolic
// link to /proc/<holder pid>/fd/<fd>: a reader opens the name as before (the kernel follows the
// link into the memfd, given the same user) and maps it read-only.
//
// Lifetime: the memfd lives while the holder holds it or a reader maps it. release() and the
// destructor remove the link (only while it still points at this process's fd) and close the fd;
// a reader's mapping keeps the pages. A holder that dies leaves a dangling link: the store treats
// it as no entry (ModelStore: find() says NotFound, a preload replaces the link, make_room
// removes dangling entry links). A link whose pid was reused resolves to some other process's
// file, which check_entry refuses as not an entry for the key.
//
// Thread safety: all members lock; any thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>

#include "core/mutex.h"
#include "core/result.h"
#include "core/thread_annotations.h"

namespace keel::store {

// The target a holder's link names: /proc/<pid>/fd/<fd>.
[[nodiscard]] std::string holder_fd_path(pid_t pid, int fd);

class SealedHolder {
 public:
  SealedHolder() = default;
  ~SealedHolder();
  SealedHolder(const SealedHolder&) = delete;
  SealedHolder& operator=(const SealedHolder&) = delete;

  // A new, empty, unsealed memfd named after `name` (shown in /proc/*/maps as /memfd:NAME); the
  // caller writes it through /proc/self/fd/<fd>, then calls seal_and_link or drop.
  [[nodiscard]] Result<int> create(const std::string& name);
  // Seals `fd` (all four seals) and names it `link_path` — a temporary link renamed into place,
  // replacing what was there (an old link, a dangling one) atomically. The fd is then held until
  // release(link_path) or the destructor. On error the fd is closed and nothing is linked.
  [[nodiscard]] Status seal_and_link(int fd, const std::string& link_path);
  // Closes a created fd that will not be linked.
  void drop(int fd);
  // Removes `link_path` (when it still names this holder's fd) and closes the fd; false when this
  // holder holds nothing under that name.
  bool release(const std::string& link_path);
  // Whether `link_path` is one of this holder's entries.
  [[nodiscard]] bool holds(const std::string& link_path) const;

 private:
  void unlink_if_ours(const std::string& link_path, int fd) const;

  mutable Mutex mu_;
  std::map<std::string, int> held_ KEEL_GUARDED_BY(mu_);  // link path → the sealed memfd
};

}  // namespace keel::store
