// Files written whole (memsight/io.h): a signal that ends a run mid-write
// takes the run's temporaries with it. Tried in a child process, which the
// signal ends.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "input/temp_files.h"
#include "memsight/io.h"

namespace memsight {
namespace {

TEST(AtomicFile, ASignalRemovesTheTemporariesInFlight) {
  char dir[] = "/tmp/memsight-atomic-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string tmp = std::string(dir) + "/" + temp_files::prefix_for("out.txt") + "1-abcdef";
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) ::_exit(3);
    std::fclose(f);
    temp_files::InFlight in_flight(tmp);
    remove_temporaries_on_signals();
    ::raise(SIGTERM);
    ::_exit(4);  // not reached: SIGTERM ends the process
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  struct stat st {};
  EXPECT_NE(::stat(tmp.c_str(), &st), 0) << tmp << " was left behind";
  ::rmdir(dir);
}

TEST(AtomicFile, TemporaryNamesFitAFolderEntry) {
  EXPECT_EQ(temp_files::prefix_for("r.txt"), ".r.txt.memsight-tmp-");
  EXPECT_LE(temp_files::prefix_for(std::string(255, 'x')).size() + 20, 255u);
}

}  // namespace
}  // namespace memsight
