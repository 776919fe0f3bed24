#include "support/input_file.h"

#include "support/file_observer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

namespace orch {

std::string describe_file_type(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISREG(mode)) return "a regular file";
  return "not a regular file";
}

InputFile read_input_file(const std::string& path, size_t max_bytes) {
  InputFile out = read_regular_file(path, max_bytes);
  if (out.status == InputFile::Status::Ok) observe_file(FileFact::Contents, path, out.text);
  return out;
}

InputFile read_regular_file(const std::string& path, size_t max_bytes) {
  InputFile out;
  // Not even opened unless it is a regular file: opening a device can act on it (a watchdog,
  // a tape), and opening a FIFO wakes its writer.
  struct stat named {};
  if (::stat(path.c_str(), &named) != 0) {
    out.error = std::strerror(errno);
    return out;
  }
  if (!S_ISREG(named.st_mode)) {
    out.error = "it is " + describe_file_type(named.st_mode) + ", not a regular file";
    return out;
  }
  // O_NONBLOCK, and the type checked again on the open descriptor: the name may have been
  // swapped for a FIFO since, whose open would otherwise wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    out.error = std::strerror(errno);
    return out;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    out.error = std::strerror(errno);
    return out;
  }
  if (!S_ISREG(st.st_mode)) {
    out.error = "it is " + describe_file_type(st.st_mode) + ", not a regular file";
    return out;
  }
  if (st.st_size > 0 && static_cast<unsigned long long>(st.st_size) > max_bytes) {
    out.status = InputFile::Status::TooLarge;
    out.size = static_cast<size_t>(st.st_size);
    return out;
  }
  // Read to the end, but never past the limit: st_size may be 0 (/proc) or stale.
  // One byte more than the size, so that the read meeting the end needs no second buffer.
  out.text.resize(std::min(max_bytes, static_cast<size_t>(std::max<off_t>(st.st_size, 0))) + 1);
  size_t have = 0;
  for (;;) {
    if (have == out.text.size()) {
      if (have > max_bytes) break;
      out.text.resize(std::min(max_bytes + 1, std::max<size_t>(have * 2, 4096)));
    }
    ssize_t n = ::read(fd, out.text.data() + have, out.text.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      out.error = std::strerror(errno);
      out.text.clear();
      return out;
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  if (have > max_bytes) {
    out.status = InputFile::Status::TooLarge;
    out.size = have;
    out.text.clear();
    return out;
  }
  out.text.resize(have);
  out.status = InputFile::Status::Ok;
  return out;
}

}  // namespace orch
