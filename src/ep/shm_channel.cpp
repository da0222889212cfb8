// ShmChannel: the shared object's layout and the create/attach handshake.
#include "ep/shm_channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace keel::ep {

namespace {

constexpr uint32_t kMagic = 0x4B45504D;  // "MPEK"
constexpr uint32_t kVersion = 1;
constexpr size_t kPage = 4096;

size_t round_up(size_t n) { return (n + kPage - 1) / kPage * kPage; }

Status errno_status(const std::string& what) {
  return Status::io_error(what + ": " + std::strerror(errno));
}

}  // namespace

// The first page of the object. Mailboxes follow: request at kPage, reply after it.
struct ShmChannel::Control {
  uint32_t magic;
  uint32_t version;
  uint64_t request_bytes;
  uint64_t reply_bytes;
  alignas(64) std::atomic<uint32_t> request_seq;
  alignas(64) std::atomic<uint32_t> reply_seq;
};
static_assert(sizeof(ShmChannel::Control) <= kPage);

Result<std::unique_ptr<ShmChannel>> ShmChannel::create(size_t request_bytes, size_t reply_bytes) {
  static std::atomic<uint32_t> counter{0};
  std::random_device rd;
  std::unique_ptr<ShmChannel> ch(new ShmChannel());
  ch->name_ = "/keel-ep-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
              std::to_string(rd());
  const size_t req = round_up(request_bytes), rep = round_up(reply_bytes);
  ch->size_ = kPage + req + rep;
  const int fd = shm_open(ch->name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno_status("shm_open " + ch->name_);
  ch->creator_ = ch->linked_ = true;
  if (ftruncate(fd, static_cast<off_t>(ch->size_)) != 0) {
    const Status s = errno_status("ftruncate " + ch->name_);
    close(fd);
    return s;  // the destructor unlinks
  }
  void* p = mmap(nullptr, ch->size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return errno_status("mmap " + ch->name_);
  ch->base_ = static_cast<std::byte*>(p);
  ch->control_ = new (p) Control{kMagic, kVersion, req, rep, {0}, {0}};
  ch->request_ = {ch->base_ + kPage, req};
  ch->reply_ = {ch->base_ + kPage + req, rep};
  return ch;
}

Result<std::unique_ptr<ShmChannel>> ShmChannel::attach(const std::string& name) {
  std::unique_ptr<ShmChannel> ch(new ShmChannel());
  ch->name_ = name;
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == ENOENT) return Status::not_found("expert channel " + name + " does not exist");
    return errno_status("shm_open " + name);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < kPage) {
    close(fd);
    return Status::corrupt("expert channel " + name + " is too small");
  }
  ch->size_ = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, ch->size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return errno_status("mmap " + name);
  ch->base_ = static_cast<std::byte*>(p);
  ch->control_ = static_cast<Control*>(p);
  const Control& c = *ch->control_;
  if (c.magic != kMagic || c.version != kVersion ||
      kPage + c.request_bytes + c.reply_bytes != ch->size_) {
    return Status::corrupt("expert channel " + name + " is not a keel expert channel (version " +
                           std::to_string(kVersion) + ")");
  }
  ch->request_ = {ch->base_ + kPage, c.request_bytes};
  ch->reply_ = {ch->base_ + kPage + c.request_bytes, c.reply_bytes};
  return ch;
}

ShmChannel::~ShmChannel() {
  unlink();
  if (base_ != nullptr) munmap(base_, size_);
}

void ShmChannel::unlink() {
  if (creator_ && linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

void ShmChannel::post_request() {
  control_->request_seq.fetch_add(1, std::memory_order_release);
  wake_post_waiters(control_->request_seq);
}

void ShmChannel::post_reply() {
  control_->reply_seq.fetch_add(1, std::memory_order_release);
  wake_post_waiters(control_->reply_seq);
}

uint32_t ShmChannel::request_seq() const {
  return control_->request_seq.load(std::memory_order_acquire);
}
uint32_t ShmChannel::reply_seq() const {
  return control_->reply_seq.load(std::memory_order_acquire);
}

Result<uint32_t> ShmChannel::wait_request(uint32_t seen, std::chrono::milliseconds timeout,
                                          const std::function<bool()>& alive) {
  return wait_for_post(control_->request_seq, seen, timeout, alive);
}

Result<uint32_t> ShmChannel::wait_reply(uint32_t seen, std::chrono::milliseconds timeout,
                                        const std::function<bool()>& alive) {
  return wait_for_post(control_->reply_seq, seen, timeout, alive);
}

Status ShmChannel::reserve(size_t request_bytes, size_t reply_bytes) {
  if (request_bytes <= request_.size() && reply_bytes <= reply_.size()) return Status();
  return Status::resource_exhausted(
      "expert channel " + name_ + ": mailboxes of " + std::to_string(request_.size()) + "/" +
      std::to_string(reply_.size()) + " bytes, the leader's batch needs " +
      std::to_string(request_bytes) + "/" + std::to_string(reply_bytes));
}

}  // namespace keel::ep
