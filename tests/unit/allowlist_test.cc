// read_allowlist on hostile files (issue 34): an allowlist is UTF-8 text of at most 4 MiB in a
// regular file; anything else is refused with one message naming the file (and for a bad
// line, the line, the byte, its offset and its column), never read in a way that blocks.
// The Python flag reads GRAPHCHECK_ALLOW with this same reader (tests/python/
// test_watch_settings.py checks that both sides agree).
#include <fcntl.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

namespace graphcheck {
namespace {

namespace fs = std::filesystem;

// The message read_allowlist throws for `path` ("" when it reads the file).
std::string allowlist_error(const std::string& path) {
  try {
    (void)read_allowlist(path);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

class ReadAllowlistFile : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("graphcheck_allow_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
  }

  static std::string error_of(const std::string& path) { return allowlist_error(path); }

  fs::path dir_;
};

TEST_F(ReadAllowlistFile, ALineThatIsNotUtf8RefusesTheFileNamingLineByteAndOffset) {
  // The reproduction: `printf 'model.*\n\xff\xfe\n'`.
  const std::string path = write("allow.txt", "model.*\n\xff\xfe\n");
  EXPECT_EQ(error_of(path), "allowlist " + path +
                                ":2: not valid UTF-8 (byte 0xff at byte offset 8 of the file, "
                                "column 1); an allowlist is UTF-8 text, one glob per line: fix "
                                "or remove the line");
  // Inside a line, after valid multi-byte text; an overlong form and a lone surrogate too.
  EXPECT_NE(error_of(write("mid.txt", "# ok\nlayers.\xc3\xa9t\xe9.w\n"))
                .find(":2: not valid "
                      "UTF-8 (byte 0xe9 "
                      "at byte offset 15 "
                      "of the file, "
                      "column 11)"),
            std::string::npos);
  EXPECT_NE(error_of(write("overlong.txt", "a\xc0\xaf\n")).find(":1: not valid UTF-8"),
            std::string::npos);
  EXPECT_NE(error_of(write("surrogate.txt", "x\n\xed\xa0\x80\n")).find(":2: not valid UTF-8"),
            std::string::npos);
  // A comment line is text too: the file is refused, not half read.
  EXPECT_NE(error_of(write("comment.txt", "# caf\xe9\nw\n")).find(":1: not valid UTF-8"),
            std::string::npos);
}

TEST_F(ReadAllowlistFile, BinaryGarbageAndNulBytesAreRefused) {
  std::string garbage;
  for (int i = 0; i < 4096; ++i) {
    garbage += static_cast<char>((i * 7919) % 256);
  }
  EXPECT_NE(error_of(write("garbage.bin", garbage)).find("allowlist "), std::string::npos);
  EXPECT_NE(error_of(write("nul.txt", std::string("a\nb\0c\n", 6)))
                .find(":2: a NUL byte (byte 0x00 at byte offset 3 of the file, column 2)"),
            std::string::npos);
}

TEST_F(ReadAllowlistFile, ValidUtf8AndAByteOrderMarkAreRead) {
  const std::string path = write("ok.txt", "\xef\xbb\xbf# sites\nlayers.*.\xc3\xa9t\xc3\xa9\n");
  EXPECT_EQ(read_allowlist(path), std::vector<std::string>{"layers.*.\xc3\xa9t\xc3\xa9"});
}

TEST_F(ReadAllowlistFile, AFifoIsRefusedWithoutBlocking) {
  const std::string path = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // No writer ever opens it: a blocking open would wait forever.
  auto refused = std::async(std::launch::async, [&path] { return error_of(path); });
  if (refused.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Release the reader (a writer's open ends its wait), so that the test ends.
    const int writer = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);  // NOLINT
    if (writer >= 0) {
      ::close(writer);
    }
    FAIL() << "read_allowlist blocked on a FIFO";
  }
  EXPECT_EQ(refused.get(), "allowlist " + path +
                               ": expected a text file with one glob per line, found a FIFO "
                               "(named pipe)");
}

TEST_F(ReadAllowlistFile, AFolderAndAMissingFileSayWhatIsThere) {
  EXPECT_EQ(error_of(dir_.string()), "allowlist " + dir_.string() +
                                         ": expected a text file with one glob per line, found "
                                         "a folder");
  EXPECT_NE(error_of((dir_ / "none.txt").string()).find("cannot be read: No such file"),
            std::string::npos);
}

TEST_F(ReadAllowlistFile, AFileOverTheCapIsRefusedSayingSo) {
  const std::string path = write("huge.txt", std::string(kMaxAllowlistBytes + 1, 'a'));
  EXPECT_EQ(error_of(path), "allowlist " + path + ": " + std::to_string(kMaxAllowlistBytes + 1) +
                                " bytes, more than the 4194304 an allowlist may hold (4 MiB); "
                                "expected a text file with one glob per line: is this the "
                                "right file?");
  EXPECT_EQ(read_allowlist(write("at_cap.txt", std::string(kMaxAllowlistBytes, 'a'))).size(), 1U);
}

// error_of(path) as an unprivileged user: root reads any file, so under root the reader
// runs in a child process that gives up its privileges first (uid and gid 65534, "nobody").
std::string error_as_unprivileged(const std::string& path) {
  if (::geteuid() != 0) {
    return allowlist_error(path);
  }
  std::array<int, 2> pipe_ends{};
  if (::pipe(pipe_ends.data()) != 0) {
    return "pipe failed";
  }
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_ends[0]);
    std::string message = "could not drop privileges";
    if (::setgid(65534) == 0 && ::setuid(65534) == 0) {
      message = allowlist_error(path);
    }
    (void)!::write(pipe_ends[1], message.data(), message.size());
    ::_exit(0);
  }
  ::close(pipe_ends[1]);
  std::string message;
  std::array<char, 512> buffer{};
  ssize_t got = 0;
  while ((got = ::read(pipe_ends[0], buffer.data(), buffer.size())) > 0) {
    message.append(buffer.data(), static_cast<std::size_t>(got));
  }
  ::close(pipe_ends[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return message;
}

TEST_F(ReadAllowlistFile, PermissionDeniedNamesTheFile) {
  const std::string path = write("private.txt", "w\n");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  EXPECT_EQ(error_as_unprivileged(path),
            "allowlist " + path +
                ": cannot be read: Permission denied (expected a text file with one glob per "
                "line); check the path and its permissions");
}

TEST_F(ReadAllowlistFile, ControlBytesOfThePathAreEscapedInTheMessage) {
  const std::string message = error_of((dir_ / "no\x1b[31mpe\n.txt").string());
  EXPECT_NE(message.find("no\\x1b[31mpe\\n.txt"), std::string::npos) << message;
  EXPECT_EQ(message.find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace graphcheck
