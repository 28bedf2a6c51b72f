// Landlock confinement for the compiler child: after landlock_confine() the
// process (and what it executes) can only open files beneath the listed
// directories, cannot bind/connect TCP sockets (ABI >= 4) and cannot reach
// abstract UNIX sockets or signal processes outside (ABI >= 6). Needs no
// privileges, so it also works where mount namespaces are forbidden.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qwen3::verify {

enum class LandlockAccess { read, read_execute, read_write };

struct LandlockRule {
  const char* path;  // a directory
  LandlockAccess access;
};

// Landlock ABI version of the running kernel, or -1 if Landlock is off.
int landlock_abi();

// Restricts the calling process for good (also sets no_new_privs). Uses only
// system calls, so it is safe between fork() and execve(). Returns 0 or an errno.
int landlock_confine(const LandlockRule* rules, size_t count);

}  // namespace qwen3::verify
