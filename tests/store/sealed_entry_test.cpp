// Sealed store entries (store/sealed_holder.h): a store given a SealedHolder builds each entry as
// a memfd with all four seals, named in the directory by a link to the holder's fd. Checked
// through the kernel, not through keel: the seals are set; writing, truncating or mapping it
// writable is refused (EPERM) even to its own process; its bytes equal the file entry's; a model
// mapped from it points into the memfd's mapping (/proc/self/maps); removing it or dropping the
// holder takes the link away; a link whose holder is gone is no entry, is replaced by the next
// preload, and is removed by a preload that makes room — other files are left alone.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/random_model.h"
#include "store/model_store.h"
#include "store/store_entry.h"
#include "support/test_support.h"

namespace keel::store {
namespace {

std::string q4_model_file(const std::string& dir, const std::string& name, uint64_t seed) {
  ThreadPool pool(1);
  model::RandomModelSpec spec;
  spec.shape = *model::find_model_shape("tiny");
  spec.weight_type = DType::kQ4_0;
  spec.seed = seed;
  const std::string path = dir + "/" + name;
  EXPECT_TRUE(model::write_random_model(spec, path, pool).ok());
  return path;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether [p, p + n) lies in one of this process's mappings of the memfd named `name`.
bool inside_memfd(const std::string& name, const void* p, size_t n) {
  std::ifstream maps("/proc/self/maps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/memfd:" + name) == std::string::npos) continue;
    uintptr_t lo = 0, hi = 0;
    std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi);
    if (a >= lo && a + n <= hi) return true;
  }
  return false;
}

// A pid that no process has now: a child that exited and was reaped.
pid_t gone_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

class SealedEntryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = testing::make_temp_dir("sealed-src");
    shm_ = testing::make_temp_dir("sealed-shm");
  }
  PosixFileSystem fs_;
  std::string src_, shm_;
};

TEST_F(SealedEntryTest, AnEntryIsASealedMemfdThatNoOneCanWrite) {
  const std::string a = q4_model_file(src_, "a.gguf", 1);
  SealedHolder holder;
  ModelStore s({shm_, 0}, &fs_, &holder);
  Result<PreloadResult> e = s.preload(a, "test");
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_TRUE(std::filesystem::is_symlink(e->path));
  EXPECT_EQ(std::filesystem::read_symlink(e->path).string().rfind("/proc/", 0), 0u);
  EXPECT_TRUE(holder.holds(e->path));

  const int ro = ::open(e->path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(ro, 0) << "the link opens the memfd";
  EXPECT_EQ(::fcntl(ro, F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  struct stat st {};
  ASSERT_EQ(::fstat(ro, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), e->bytes);
  EXPECT_EQ(::fcntl(ro, F_ADD_SEALS, 0), -1) << "F_SEAL_SEAL: the seals stay";
  const int rw = ::open(e->path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(rw, 0) << "opening for writing is allowed; writing is not";
  const char byte = 'x';
  EXPECT_EQ(::pwrite(rw, &byte, 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::ftruncate(rw, 16), -1);
  EXPECT_EQ(errno, EPERM);
  void* w = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
  EXPECT_EQ(w, MAP_FAILED);
  EXPECT_EQ(errno, EPERM);
  void* r = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, ro, 0);
  ASSERT_NE(r, MAP_FAILED) << "a read-only shared mapping is allowed";
  ::munmap(r, 4096);
  ::close(rw);
  ::close(ro);

  // The same bytes as the file entry of the same model.
  const std::string files = testing::make_temp_dir("sealed-files");
  ModelStore plain({files, 0}, &fs_);
  Result<PreloadResult> f = plain.preload(a, "test");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_FALSE(std::filesystem::is_symlink(f->path));
  EXPECT_EQ(file_bytes(e->path), file_bytes(f->path));

  // A reader finds it and its model runs from the memfd's pages.
  const ModelSource src = s.choose_source(a, std::nullopt, "test");
  ASSERT_TRUE(src.from_store) << src.store_error.to_string();
  Result<std::unique_ptr<model::Model>> m = map_entry(src.path, e->key, {});
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const gguf::TensorInfo& t = (*m)->file().tensors().front();
  const std::span<const std::byte> bytes = (*m)->file().tensor_data(t);
  EXPECT_TRUE(inside_memfd(entry_name(e->key), bytes.data(), bytes.size()));
}

TEST_F(SealedEntryTest, RemovingOrDroppingTheHolderTakesTheEntryAway) {
  const std::string a = q4_model_file(src_, "a.gguf", 1);
  const std::string b = q4_model_file(src_, "b.gguf", 2);
  std::string path_b;
  {
    SealedHolder holder;
    ModelStore s({shm_, 0}, &fs_, &holder);
    Result<PreloadResult> ea = s.preload(a, "test");
    Result<PreloadResult> eb = s.preload(b, "test");
    ASSERT_TRUE(ea.ok() && eb.ok());
    ASSERT_TRUE(s.remove(ea->key).ok());
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(ea->path)));
    EXPECT_FALSE(holder.holds(ea->path));
    EXPECT_EQ(s.find(ea->key).status().code(), StatusCode::kNotFound);
    path_b = eb->path;
    ASSERT_TRUE(std::filesystem::exists(path_b));
  }
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path_b)))
      << "the holder's end removes its links";
}

TEST_F(SealedEntryTest, ALinkWhoseHolderIsGoneIsNoEntryAndIsCleanedUp) {
  const std::string a = q4_model_file(src_, "a.gguf", 1);
  const std::string b = q4_model_file(src_, "b.gguf", 2);
  ModelStore probe({shm_, 0}, &fs_);
  Result<StoreKey> ka = key_for_file(fs_, a, "test");
  Result<StoreKey> kb = key_for_file(fs_, b, "test");
  ASSERT_TRUE(ka.ok() && kb.ok());
  // As a holder killed by SIGKILL leaves them: links to the fds of a process that is gone.
  const std::string target = holder_fd_path(gone_pid(), 5);
  ASSERT_EQ(::symlink(target.c_str(), probe.path_of(*ka).c_str()), 0);
  ASSERT_EQ(::symlink(target.c_str(), probe.path_of(*kb).c_str()), 0);
  std::ofstream(shm_ + "/unrelated") << "not ours";
  ASSERT_EQ(::symlink(target.c_str(), (shm_ + "/unrelated-link").c_str()), 0);

  Result<std::vector<EntryInfo>> none = probe.entries();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty()) << "a dangling link is not an entry";
  EXPECT_EQ(probe.find(*ka).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(probe.choose_source(a, std::nullopt, "test").from_store);

  SealedHolder holder;
  ModelStore s({shm_, 0}, &fs_, &holder);
  Result<PreloadResult> ea = s.preload(a, "test");  // replaces a's dangling link, drops b's
  ASSERT_TRUE(ea.ok()) << ea.status().to_string();
  EXPECT_FALSE(ea->already_present);
  EXPECT_TRUE(s.find(*ka).ok());
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(probe.path_of(*kb))));
  EXPECT_TRUE(std::filesystem::exists(shm_ + "/unrelated"));
  EXPECT_TRUE(std::filesystem::is_symlink(shm_ + "/unrelated-link")) << "not an entry name";
}

}  // namespace
}  // namespace keel::store
